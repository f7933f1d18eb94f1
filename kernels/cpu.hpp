// CPU reference twins of every kernel: plain loops (Eigen for the GEMM) that
// are the oracle for the CUDA kernels. Single-threaded and written to be read,
// not to be fast. Each validates its descriptor and requires host views.
#pragma once

#include "kernels/ops.hpp"

namespace kvshift::kernels::cpu {

/// RMSNorm per row.
void rms_norm(const RmsNormDesc& d);
/// RoPE apply or invert (half-split).
void rope(const RopeDesc& d);
/// Fused bias + RoPE + scatter epilogue.
void bias_rope_scatter(const EpilogueDesc& d);
/// silu(gate) * up.
void swiglu(const SwigluDesc& d);
/// Causal GQA attention, online softmax over key tiles (O(head_dim) state per query).
void attention(const AttentionDesc& d);
/// The same function by materialising each query's full softmax row (oracle for `attention`).
void attention_naive(const AttentionDesc& d);
/// Attention mass each key receives, per query head.
void attention_mass(const AttentionMassDesc& d);
/// Top-K per head with sink and recent tokens.
void top_k(const TopKDesc& d);
/// KV compaction by per-head indices (out-of-range indices give NaN rows).
void kv_gather(const GatherDesc& d);
/// GEMM through Eigen in fp32.
void gemm(const GemmDesc& d);
/// Embedding lookup (out-of-range ids give NaN rows).
void embed(const EmbedDesc& d);
/// Seeded uniform fill.
void fill_uniform(const FillDesc& d);
/// RISK-KV anchor gather (inverse RoPE on anchor keys, concatenation).
void anchor_gather(const AnchorGatherDesc& d);
/// Whole RISK-KV reconstruction of one group for all requests.
void reconstruct(const ReconstructDesc& d);

}  // namespace kvshift::kernels::cpu
