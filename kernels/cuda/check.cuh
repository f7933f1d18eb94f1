// Status checks for every CUDA runtime and cuBLAS call: the failing statement,
// the library's error text and file:line go into a CudaError.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda.hpp"

namespace kvshift::kernels::cuda {

[[noreturn]] inline void throw_cuda_error(const char* statement, const char* error,
                                          const char* file, int line) {
  throw CudaError(std::string(statement) + " failed: " + error + " at " + file + ":" +
                  std::to_string(line));
}

}  // namespace kvshift::kernels::cuda

#define KVSHIFT_CUDA_CHECK(stmt)                                                          \
  do {                                                                                    \
    const cudaError_t kvshift_err_ = (stmt);                                              \
    if (kvshift_err_ != cudaSuccess) {                                                    \
      ::kvshift::kernels::cuda::throw_cuda_error(#stmt, cudaGetErrorString(kvshift_err_), \
                                                 __FILE__, __LINE__);                     \
    }                                                                                     \
  } while (0)

#define KVSHIFT_CUBLAS_CHECK(stmt)                                                          \
  do {                                                                                      \
    const cublasStatus_t kvshift_st_ = (stmt);                                              \
    if (kvshift_st_ != CUBLAS_STATUS_SUCCESS) {                                             \
      ::kvshift::kernels::cuda::throw_cuda_error(#stmt, cublasGetStatusString(kvshift_st_), \
                                                 __FILE__, __LINE__);                       \
    }                                                                                       \
  } while (0)

/// After a <<<>>> launch: reports configuration errors naming the kernel (a string literal).
#define KVSHIFT_LAUNCH_CHECK(kernel_name)                                                  \
  do {                                                                                     \
    const cudaError_t kvshift_err_ = cudaGetLastError();                                   \
    if (kvshift_err_ != cudaSuccess) {                                                     \
      ::kvshift::kernels::cuda::throw_cuda_error(                                          \
          "launch of " kernel_name, cudaGetErrorString(kvshift_err_), __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)
