// Internal interface of the tensor-core attention paths, dispatched from
// attention.cu for bf16 inputs with 16-byte aligned rows and no key mask:
// attention_fa2.cu (mma.sync, cp.async pipeline; the default) and
// attention_tc.cu (WMMA, the first tensor-core kernel, kept as attention_wmma).
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/common.cuh"

namespace kvshift::kernels::cuda::detail {

struct TcParams {
  const __nv_bfloat16 *q, *k, *v;
  std::int64_t q_stride0, q_stride1, k_stride0, k_stride1, v_stride0, v_stride1;
  DevView out;
  float* lse;
  std::int64_t lse_stride0, lse_stride1;
  std::int64_t tq, tk;
  int group;
  std::int64_t offset;
  float scale;
};

/// bf16 q/k/v, head_dim 64 or 128, rows 16-byte aligned, no key mask.
bool attention_tc_applies(const AttentionDesc& d);
/// The kernels' parameters from a validated descriptor.
TcParams tc_params(const AttentionDesc& d, float scale);
/// Launches the WMMA kernel (the descriptor is already validated).
void attention_tc(const AttentionDesc& d, float scale, CUstream_st* stream);
/// Launches the FlashAttention-2-style kernel (the descriptor is already validated).
void attention_fa2(const AttentionDesc& d, float scale, CUstream_st* stream);

}  // namespace kvshift::kernels::cuda::detail
