# CUDA is optional: detected with check_language, forced with
# -DKVSHIFT_ENABLE_CUDA=ON|OFF. Sets KVSHIFT_HAVE_CUDA for the folders below.
include(CheckLanguage)
set(KVSHIFT_HAVE_CUDA OFF)
if(NOT KVSHIFT_ENABLE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # sm_90 (H100/H200) by default; override with -DCMAKE_CUDA_ARCHITECTURES=80;86 etc.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # nvcc 13 with CMake 3.25 has no CUDA20 dialect
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(KVSHIFT_HAVE_CUDA ON)
  elseif(KVSHIFT_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KVSHIFT_ENABLE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "kvshift: CUDA backend ${KVSHIFT_HAVE_CUDA}")
