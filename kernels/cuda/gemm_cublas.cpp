// GEMM through cublasGemmEx (fp32 accumulation; fp16/bf16 or fp32 inputs).
// Row-major C[m,n] = A[m,k] * op(B) is computed as the column-major product
// C^T[n,m] = op(B)^T * A^T, which needs no copies: a row-major matrix is the
// transpose of a column-major one with the same leading dimension.
#include <cublas_v2.h>

#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::kernels::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kI32:
      break;
  }
  throw std::invalid_argument("gemm: unsupported dtype " + std::string(dtype_name(t)));
}

}  // namespace

void gemm(const GemmDesc& d, const Context& ctx) {
  validate(d);
  require_device("gemm", Device::kCuda, {&d.a, &d.b, &d.c});
  const std::int64_t m = d.a.shape[0], k = d.a.shape[1], n = d.c.shape[1];
  if (m == 0 || n == 0) return;
  if (d.a.dtype == DType::kF32 && d.c.dtype != DType::kF32) {
    throw std::invalid_argument("gemm: fp32 inputs need an fp32 output on CUDA");
  }
  const auto as_int = [](std::int64_t v, const char* what) {
    if (v > INT32_MAX) throw std::invalid_argument(std::string("gemm: ") + what + " exceeds int32");
    return static_cast<int>(v);
  };
  const int ldb = as_int(std::max<std::int64_t>(d.b.stride[0], d.b.shape[1]), "ldb");
  const int lda = as_int(std::max<std::int64_t>(d.a.stride[0], k), "lda");
  const int ldc = as_int(std::max<std::int64_t>(d.c.stride[0], n), "ldc");
  KVSHIFT_CUBLAS_CHECK(
      cublasGemmEx(ctx.cublas(), d.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                   as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &d.alpha, d.b.data,
                   cuda_type(d.b.dtype), ldb, d.a.data, cuda_type(d.a.dtype), lda, &d.beta,
                   d.c.data, cuda_type(d.c.dtype), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace kvshift::kernels::cuda
