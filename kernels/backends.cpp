// Op names, one switch so that a new Op without a name fails to compile (-Wswitch).
#include "kernels/backends.hpp"

namespace kvshift::kernels {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kRmsNorm:
      return "rms_norm";
    case Op::kRope:
      return "rope";
    case Op::kBiasRopeScatter:
      return "bias_rope_scatter";
    case Op::kSwiglu:
      return "swiglu";
    case Op::kAttention:
      return "attention";
    case Op::kAttentionMass:
      return "attention_mass";
    case Op::kGroupReduce:
      return "group_reduce";
    case Op::kAvgPool:
      return "avg_pool";
    case Op::kLogMeanAttention:
      return "log_mean_attention";
    case Op::kIm2Col:
      return "im2col";
    case Op::kBiasAct:
      return "bias_act";
    case Op::kLayerNorm:
      return "layer_norm";
    case Op::kWindowAttention:
      return "window_attention";
    case Op::kAxialHead:
      return "axial_head";
    case Op::kTopK:
      return "top_k";
    case Op::kKvGather:
      return "kv_gather";
    case Op::kGemm:
      return "gemm";
    case Op::kEmbed:
      return "embed";
    case Op::kFillUniform:
      return "fill_uniform";
    case Op::kAnchorGather:
      return "anchor_gather";
    case Op::kReconstruct:
      return "reconstruct";
  }
  return "?";
}

}  // namespace kvshift::kernels
