# GPU benchmark driver (bench/gpu_check.sh runs it): built only where the CUDA
# backend is real.
if(KVSHIFT_HAVE_CUDA)
  add_executable(gpu_recovery_bench ${CMAKE_CURRENT_LIST_DIR}/gpu_recovery.cpp)
  target_link_libraries(gpu_recovery_bench PRIVATE
    kvshift_backend_cuda kvshift_kernels_cuda kvshift_cost CUDA::cudart kvshift_warnings)
endif()
