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
/// Attention mass (sum) or the largest weight (max) each key receives, per query head.
void attention_mass(const AttentionMassDesc& d);
/// Non-causal sliding-window multi-head attention (the mapper's encoder).
void window_attention(const WindowAttentionDesc& d);
/// Per-query-head scores reduced to KV heads (sum or max over each GQA group).
void group_reduce(const GroupReduceDesc& d);
/// Average pooling along each row (zero-padded ends, divided by the kernel).
void avg_pool(const AvgPoolDesc& d);
/// log(mass / visible queries + eps), in double.
void log_mean_attention(const LogMeanAttentionDesc& d);
/// im2col of a 1-D convolution with same padding.
void im2col(const Im2ColDesc& d);
/// In-place bias, optional GELU and sinusoidal positions.
void bias_act(const BiasActDesc& d);
/// LayerNorm per row (double accumulation).
void layer_norm(const LayerNormDesc& d);
/// The mapper's factored head-axis cross-attention.
void axial_head(const AxialHeadDesc& d);
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
