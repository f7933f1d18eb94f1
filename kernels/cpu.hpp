// The CPU implementation of every kernel: the one the CPU backend's forward
// pass and RISK-KV reconstruction run on, and the twin the CUDA kernels are
// checked against. Plain loops written to be read, except where a forward pass
// spends its time: RoPE rotates fp32 heads in place, and attention and its mass
// run per head as chunked Eigen GEMMs (attention_naive stays the loop oracle).
// Each op validates its descriptor and requires host views.
#pragma once

#include "kernels/ops.hpp"

namespace kvshift::kernels::cpu {

/// Threads the CPU ops (attention's heads, Eigen's GEMMs) use: 1 unless the environment sets
/// KVSHIFT_THREADS or set_threads() was called (needs OpenMP). One is the default because on
/// a shared or oversubscribed machine OpenMP barriers cost more than the work they split.
int threads();
/// Sets the thread count (and Eigen's).
void set_threads(int count);
/// Applies the thread setting to Eigen once; call before Eigen GEMMs outside these ops.
void apply_threads();

/// RMSNorm per row.
void rms_norm(const RmsNormDesc& d);
/// RoPE apply or invert (half-split).
void rope(const RopeDesc& d);
/// Fused bias + RoPE + scatter epilogue.
void bias_rope_scatter(const EpilogueDesc& d);
/// silu(gate) * up.
void swiglu(const SwigluDesc& d);
/// Causal GQA attention: per head, chunks of queries against all visible keys (at most
/// 128 × keys scores at once, never T × T); heads in parallel when threads() > 1.
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

/// The twins as one object for the op programs (backend/decoder_program.hpp,
/// backend/cuda/mapper_program.hpp): run(desc) per descriptor, as cuda::Ops on a GPU.
struct Ops {
  void run(const RmsNormDesc& d) const { rms_norm(d); }
  void run(const EpilogueDesc& d) const { bias_rope_scatter(d); }
  void run(const SwigluDesc& d) const { swiglu(d); }
  void run(const AttentionDesc& d) const { attention(d); }
  void run(const AttentionMassDesc& d) const { attention_mass(d); }
  void run(const GemmDesc& d) const { gemm(d); }
  void run(const Im2ColDesc& d) const { im2col(d); }
  void run(const BiasActDesc& d) const { bias_act(d); }
  void run(const LayerNormDesc& d) const { layer_norm(d); }
  void run(const WindowAttentionDesc& d) const { window_attention(d); }
  void run(const AxialHeadDesc& d) const { axial_head(d); }
};

}  // namespace kvshift::kernels::cpu
