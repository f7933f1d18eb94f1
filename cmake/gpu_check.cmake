# KVSHIFT_GPU_CHECK=ON (preset gpu-check; bench/gpu_check.sh configures it): only the
# GPU parts — the cost model, the kernels with their CPU twins and CUDA versions, the
# CUDA profiler, their tests (kernels_conformance_test, kernels_ref_test,
# cuda_profiler_test, gpu_mapper_test: none needs kvshift_backend) and the GPU
# benchmark — so that a bare CUDA machine builds them with CUDA, Eigen and GoogleTest
# alone. KVSHIFT_GPU_DEPS may name a folder holding eigen3/ (headers) and googletest/
# (sources), as `bench/gpu_check.sh --pack-deps` makes.
set(KVSHIFT_ENABLE_CUDA ON)  # this build is the CUDA parts: no CUDA compiler is an error
include(cmake/cuda.cmake)

set(KVSHIFT_GPU_DEPS "" CACHE PATH "Folder with eigen3/ and googletest/ (else system-wide)")
if(KVSHIFT_GPU_DEPS)
  add_library(Eigen3::Eigen INTERFACE IMPORTED)
  target_include_directories(Eigen3::Eigen INTERFACE "${KVSHIFT_GPU_DEPS}/eigen3")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  add_subdirectory("${KVSHIFT_GPU_DEPS}/googletest" googletest EXCLUDE_FROM_ALL)
else()
  find_package(Eigen3 3.4 REQUIRED NO_MODULE)
  find_package(GTest REQUIRED)
endif()

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")  # what the script runs
enable_testing()
include(cmake/testing.cmake)
add_subdirectory(util)
add_subdirectory(cost_model)
add_subdirectory(kernels)
add_subdirectory(backend/cuda)
add_subdirectory(tests/kernels)
include(bench/gpu.cmake)
