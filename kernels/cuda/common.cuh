// Device-side helpers shared by the .cu files: a POD copy of TensorView that
// kernels take by value, dtype-dispatched loads and stores (the switch is
// uniform across a launch, so it costs a predictable branch), warp and block
// reductions, and grid sizing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.cuh"
#include "kernels/ops.hpp"

namespace kvshift::kernels::cuda::detail {

inline constexpr int kThreads = 256;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

/// TensorView without std::array, for kernel parameters.
struct DevView {
  void* data;
  DType dtype;
  std::int64_t shape[kMaxRank];
  std::int64_t stride[kMaxRank];
};

inline DevView dev(const TensorView& v) {
  DevView d{v.data, v.dtype, {}, {}};
  for (int i = 0; i < kMaxRank; ++i) {
    d.shape[i] = v.shape[i];
    d.stride[i] = v.stride[i];
  }
  return d;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Refuses what only the CPU twin computes (Gemma 3's sliding windows, QK norm, GeGLU and norms
/// after a sublayer): the CUDA backend runs Llama-family decoders.
inline void cpu_only(bool used, const char* op, const char* what) {
  if (used) {
    throw std::invalid_argument(std::string(op) + ": " + what +
                                " has no CUDA kernel (Gemma 3 runs on the CPU backend)");
  }
}

/// Grid size for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t blocks = ceil_div(n, threads);
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

__device__ __forceinline__ float ld(const void* p, std::int64_t i, DType t) {
  switch (t) {
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::kI32:
      return static_cast<float>(static_cast<const std::int32_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void st(void* p, std::int64_t i, DType t, float v) {
  switch (t) {
    case DType::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      return;
    case DType::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      return;
    case DType::kI32:
      static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v);
      return;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the total.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  __syncthreads();  // protect `partial` from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += partial[w];
  return total;
}

/// Exclusive prefix sum over the block in thread order; `total` receives the block's sum.
__device__ inline int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_totals[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(kFullMask, inclusive, o);
    if (lane >= o) inclusive += n;
  }
  __syncthreads();
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
    if (w < warp) before += warp_totals[w];
    sum += warp_totals[w];
  }
  *total = sum;
  return before + inclusive - v;
}

}  // namespace kvshift::kernels::cuda::detail
