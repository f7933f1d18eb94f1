// What a kernel backend can run, asked as ggml asks ggml_backend_supports_op: one Op per
// descriptor of ops.hpp, and per backend `supports(op, dtype)` (cpu:: here, cuda:: in cuda.hpp).
// The dtype is that of the first tensor of the op's descriptor (x, z, gate, q, in, mass, scores,
// src, a, table, out or cache); validate() ties the other tensors' dtypes to it or fixes them.
// Limits that are not about a dtype (the head_dim a CUDA kernel was compiled for) are documented
// with the backend's supports().
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "kernels/tensor.hpp"

namespace kvshift::kernels {

/// One op of ops.hpp.
enum class Op : std::uint8_t {
  kRmsNorm,
  kRope,
  kBiasRopeScatter,
  kSwiglu,
  kAttention,
  kAttentionMass,
  kGroupReduce,
  kAvgPool,
  kLogMeanAttention,
  kIm2Col,
  kBiasAct,
  kLayerNorm,
  kWindowAttention,
  kAxialHead,
  kTopK,
  kKvGather,
  kGemm,
  kEmbed,
  kFillUniform,
  kAnchorGather,
  kReconstruct,
};

/// Every op, in declaration order.
inline constexpr std::array kOps = {Op::kRmsNorm,         Op::kRope,         Op::kBiasRopeScatter,
                                    Op::kSwiglu,          Op::kAttention,    Op::kAttentionMass,
                                    Op::kGroupReduce,     Op::kAvgPool,      Op::kLogMeanAttention,
                                    Op::kIm2Col,          Op::kBiasAct,      Op::kLayerNorm,
                                    Op::kWindowAttention, Op::kAxialHead,    Op::kTopK,
                                    Op::kKvGather,        Op::kGemm,         Op::kEmbed,
                                    Op::kFillUniform,     Op::kAnchorGather, Op::kReconstruct};

/// The name validate() gives the op in its errors ("rms_norm", "bias_rope_scatter", ...).
std::string_view op_name(Op op);

namespace cpu {
/// Whether the CPU twin of `op` runs with `dtype` as its first tensor's dtype.
bool supports(Op op, DType dtype);
}  // namespace cpu

}  // namespace kvshift::kernels
