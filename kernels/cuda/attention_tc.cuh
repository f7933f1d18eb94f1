// Internal interface of the tensor-core attention path (attention_tc.cu),
// dispatched from attention.cu for bf16 inputs with 16-byte aligned rows.
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

/// bf16 q/k/v, head_dim 64 or 128, rows 16-byte aligned.
bool attention_tc_applies(const AttentionDesc& d);
/// Launches the tensor-core kernel (the descriptor is already validated).
void attention_tc(const AttentionDesc& d, float scale, CUstream_st* stream);

}  // namespace kvshift::kernels::cuda::detail
