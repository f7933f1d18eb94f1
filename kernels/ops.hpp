// Op descriptors: one plain struct per kernel, holding non-owning views and
// scalars. The CPU reference twins (cpu.hpp) and the CUDA kernels (cuda.hpp)
// take the same descriptor, and validate() below is the single place that
// checks shapes, strides and dtypes (it throws std::invalid_argument naming the
// op and the field). Conventions: views are row-major with a unit innermost
// stride; attention is causal with query i at position kv_tokens - q_tokens + i;
// RoPE is the Hugging Face half-split form (dim i rotates with i + head_dim/2)
// with angles computed in double precision on both backends.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.hpp"

namespace kvshift::kernels {

/// out = x * rsqrt(mean(x^2) + eps) * weight, per row.
struct RmsNormDesc {
  TensorView x;       // [rows, dim]
  TensorView weight;  // [dim]
  TensorView out;     // [rows, dim]
  float eps = 1e-6f;
  /// out += norm(x)·weight: Gemma's norm after a sublayer, then the residual.
  bool accumulate = false;
};

/// Rotary embedding (inverse = rotate by the negative angle). out may alias x.
struct RopeDesc {
  TensorView x;    // [tokens, heads, head_dim]
  TensorView out;  // [tokens, heads, head_dim]
  double theta = 10000.0;
  std::int64_t position_offset = 0;  ///< token t sits at position offset + t
  bool inverse = false;
};

/// One destination of the fused epilogue: columns [column, column + heads*head_dim) of z.
struct EpilogueSegment {
  std::int64_t column = 0;
  bool rope = false;  ///< apply RoPE (keys, queries) or copy (values)
  TensorView dst;     // [requests, tokens, heads, head_dim]
  /// [head_dim] f32, optional: RMSNorm of each head before RoPE (Gemma's QK norm), eps norm_eps
  TensorView head_norm;
  float norm_eps = 1e-6f;
};

/// Fused bias + RoPE + scatter: z rows are (request, token) pairs, request-major.
struct EpilogueDesc {
  TensorView z;                           // [requests * tokens, width] f32 or bf16 (a GEMM output)
  TensorView bias;                        // [width] f32, optional
  std::vector<EpilogueSegment> segments;  ///< at most kMaxSegments
  double theta = 10000.0;
  std::int64_t position_offset = 0;
  static constexpr int kMaxSegments = 8;
};

/// out = act(gate) * up, act SiLU (SwiGLU) or GELU with the tanh approximation (Gemma's GeGLU).
struct SwigluDesc {
  enum class Act : std::uint8_t { kSilu, kGeluTanh };
  TensorView gate;  // [rows, inter]
  TensorView up;    // [rows, inter]
  TensorView out;   // [rows, inter]
  Act act = Act::kSilu;
};

/// Causal grouped-query attention with an online softmax (no T x T buffer). With key_mask,
/// a key whose entry is 0 takes no part for that KV head's queries (pruning with a budget
/// that differs per head keeps each head's own keys); a query that sees no key gets out 0
/// and lse −inf.
struct AttentionDesc {
  TensorView q;         // [q_tokens, q_heads, head_dim]
  TensorView k;         // [kv_tokens, kv_heads, head_dim]
  TensorView v;         // [kv_tokens, kv_heads, head_dim]
  TensorView out;       // [q_tokens, q_heads, head_dim]
  TensorView lse;       // [q_tokens, q_heads] f32, optional: log-sum-exp of the scaled scores
  float scale = 0;      ///< 0 means 1/sqrt(head_dim)
  TensorView key_mask;  // [kv_tokens, kv_heads] i32, optional: 0 drops the key for that head
  /// > 0: a sliding window, each query sees only the last `window` keys up to itself.
  std::int64_t window = 0;
};

/// How a reduction combines its terms.
enum class Reduce : std::uint8_t { kSum, kMax };

/// Attention mass: out[h, j] = sum (kSum: H2O, SnapKV, ProxyKV) or max (kMax: KVZip) over
/// queries i >= query_begin of softmax_i(j), per query head; a key no such query sees gets 0.
struct AttentionMassDesc {
  TensorView q;    // [q_tokens, q_heads, head_dim]
  TensorView k;    // [kv_tokens, kv_heads, head_dim]
  TensorView lse;  // [q_tokens, q_heads] f32, from the attention op
  TensorView out;  // [q_heads, kv_tokens] f32
  float scale = 0;
  std::int64_t query_begin = 0;  ///< SnapKV-style window: only queries from here on vote
  Reduce reduce = Reduce::kSum;
  std::int64_t window = 0;  ///< the attention's sliding window (AttentionDesc::window)
};

/// GQA group reduction of per-query-head scores to KV heads: out[r, t] = reduce over
/// in[r·group + i, t], i < group = in rows / out rows (rows layer·heads, so the consecutive
/// query heads g·group .. g·group + group − 1 of a layer form its KV head g). Sums in row order.
struct GroupReduceDesc {
  TensorView in;   // [layers * q_heads, tokens] f32
  TensorView out;  // [layers * kv_heads, tokens] f32
  Reduce reduce = Reduce::kSum;
};

/// SnapKV's pooling along each row: out[r, t] = sum of in[r, s] for |s − t| <= kernel/2 inside
/// the row, divided by `kernel` (odd; same padding, the ends padded with zeros).
struct AvgPoolDesc {
  TensorView in;   // [rows, tokens] f32
  TensorView out;  // [rows, tokens] f32
  int kernel = 7;
};

/// Added to a mean attention weight before its log (a key nobody attends to: log(1e-6)).
inline constexpr double kLogMeanAttentionEps = 1e-6;

/// ProxyKV's feature transform ("log_mean_attention") of a prefill's attention mass:
/// x[c, t] = log(mass[c, t] / (tokens − t) + eps), in double (tokens − t queries see key t).
struct LogMeanAttentionDesc {
  TensorView mass;  // [rows, tokens] f32
  TensorView out;   // [rows, tokens] f32
  double eps = kLogMeanAttentionEps;
};

/// Stem of a 1-D convolution as a GEMM (im2col, same padding):
/// cols[t, c·kernel + j] = x[c, t + j − kernel/2], 0 outside [0, tokens).
struct Im2ColDesc {
  TensorView x;     // [channels, tokens] f32
  TensorView cols;  // [tokens, channels * kernel] f32
  int kernel = 3;   ///< odd
};

/// A GEMM's epilogue, in place: x = act(x + bias), then (with `positions`) the sinusoidal
/// position of row t added: column 2m gets sin(t / 10000^(2m/width)), column 2m + 1 its cos.
struct BiasActDesc {
  enum class Act : std::uint8_t { kNone, kGelu };  ///< kGelu: exact, 0.5·v·(1 + erf(v/√2))
  TensorView x;                                    // [rows, width] f32
  TensorView bias;                                 // [width] f32
  Act act = Act::kNone;
  bool positions = false;
};

/// LayerNorm per row: out = (x − mean) / sqrt(var + eps) · weight + bias (biased variance).
struct LayerNormDesc {
  TensorView x;       // [rows, dim] f32
  TensorView weight;  // [dim] f32
  TensorView bias;    // [dim] f32
  TensorView out;     // [rows, dim] f32; may alias x
  float eps = 1e-5f;
};

/// Non-causal multi-head attention over a sliding window: query t attends to the keys
/// |t − j| <= radius (softmax over those only).
struct WindowAttentionDesc {
  TensorView q;    // [tokens, heads, head_dim] f32
  TensorView k;    // [tokens, heads, head_dim] f32
  TensorView v;    // [tokens, heads, head_dim] f32
  TensorView out;  // [tokens, heads, head_dim] f32
  std::int64_t radius = 64;
  float scale = 0;  ///< 0 means 1/sqrt(head_dim)
};

/// The HybridAxialMapper's head: at each time t, target j attends over the source channels i,
/// in the factored form of backend/proxy_mapper.cpp:
///   y[j, t] = sum_i softmax_i(scale·(g[j, i] + u[j]·x[i, t] + s[t, i] + c[t]·x[i, t]))
///             · (vb[i] + vf·x[i, t]) + ve[t] + out_bias,
/// with the per-time terms packed as time_terms[t] = [s[t, 0..sources), c[t], ve[t]].
struct AxialHeadDesc {
  TensorView x;           // [sources, tokens] f32: the mapper's input features
  TensorView g;           // [targets, sources] f32
  TensorView u;           // [targets] f32
  TensorView vb;          // [sources] f32
  TensorView time_terms;  // [tokens, sources + 2] f32
  TensorView y;           // [targets, tokens] f32
  float vf = 0;
  float out_bias = 0;
  float scale = 1;
};

/// Top-K per head: the first `sink` and last `recent` tokens are always kept, the rest by
/// score (higher first, ties to the lower token index); indices come out ascending.
struct TopKDesc {
  TensorView scores;   // [heads, tokens] f32
  TensorView indices;  // [heads, keep] i32
  std::int64_t sink = 0;
  std::int64_t recent = 0;
};

/// KV compaction: dst[j, h, :] = src[indices[h, j], h, :].
struct GatherDesc {
  TensorView src;      // [tokens, heads, head_dim]
  TensorView indices;  // [heads, keep] i32
  TensorView dst;      // [keep, heads, head_dim]
};

/// c = alpha * a * op(b) + beta * c; op(b) = b^T when b_transposed (weights as [out, in]).
struct GemmDesc {
  TensorView a;  // [m, k]
  TensorView b;  // [n, k] if b_transposed else [k, n]
  TensorView c;  // [m, n] f32 or a's dtype
  bool b_transposed = true;
  float alpha = 1;
  float beta = 0;
};

/// out[t, :] = table[ids[t], :].
struct EmbedDesc {
  TensorView table;  // [vocab, dim]
  TensorView ids;    // [tokens] i32
  TensorView out;    // [tokens, dim]
};

/// Seeded uniform values in [lo, hi): element i gets lo + (hi - lo) * u(seed, i).
struct FillDesc {
  TensorView out;  // any shape, contiguous
  std::uint64_t seed = 1;
  float lo = -1;
  float hi = 1;
};

/// RISK-KV step 1: x[(r, t), a*w .. (a+1)*w) = [inverse-RoPE(K_a), V_a] of anchor layer a.
struct AnchorGatherDesc {
  TensorView cache;  // [requests, layers, 2, tokens, kv_heads, head_dim]
  std::vector<int> anchor_layers;
  TensorView x;  // [requests * tokens, anchors * w], w = 2 * kv_heads * head_dim
  double theta = 10000.0;
  std::int64_t position_offset = 0;
};

/// RISK-KV reconstruction of one group for all requests sharing its predictor:
/// gather anchors -> z = x * weight (fp32 accumulate) -> + bias, RoPE on K -> scatter.
struct ReconstructDesc {
  TensorView cache;  // [requests, layers, 2, tokens, kv_heads, head_dim]
  std::vector<int> anchor_layers;
  std::vector<int> target_layers;
  TensorView weight;       // [anchors * w, targets * w] (x * weight), f32/bf16/f16
  TensorView bias;         // [targets * w] f32
  TensorView x_workspace;  // [requests * tokens, anchors * w], weight's dtype
  TensorView z_workspace;  // [requests * tokens, targets * w] f32 (or bf16 with a bf16 predictor)
  double theta = 10000.0;
  std::int64_t position_offset = 0;
};

/// Workspace shapes a ReconstructDesc needs ({rows, anchors*w} and {rows, targets*w}).
struct ReconstructShapes {
  std::int64_t rows = 0, x_cols = 0, z_cols = 0;
};
ReconstructShapes reconstruct_shapes(const TensorView& cache, int anchors, int targets);

/// The three steps of a reconstruction as their own descriptors.
AnchorGatherDesc anchor_gather_of(const ReconstructDesc& d);
GemmDesc gemm_of(const ReconstructDesc& d);
EpilogueDesc epilogue_of(const ReconstructDesc& d);
/// View of one layer's K (kv = 0) or V (kv = 1) in a cache: [requests, tokens, kv_heads, head_dim].
TensorView cache_layer(const TensorView& cache, int layer, int kv);

void validate(const RmsNormDesc& d);
void validate(const RopeDesc& d);
void validate(const EpilogueDesc& d);
void validate(const SwigluDesc& d);
void validate(const AttentionDesc& d);
void validate(const AttentionMassDesc& d);
void validate(const GroupReduceDesc& d);
void validate(const AvgPoolDesc& d);
void validate(const LogMeanAttentionDesc& d);
void validate(const Im2ColDesc& d);
void validate(const BiasActDesc& d);
void validate(const LayerNormDesc& d);
void validate(const WindowAttentionDesc& d);
void validate(const AxialHeadDesc& d);
void validate(const TopKDesc& d);
void validate(const GatherDesc& d);
void validate(const GemmDesc& d);
void validate(const EmbedDesc& d);
void validate(const FillDesc& d);
void validate(const AnchorGatherDesc& d);
void validate(const ReconstructDesc& d);

/// Throws std::invalid_argument unless every non-empty view of an op lives on `device`.
void require_device(const char* op, Device device, std::initializer_list<const TensorView*> views);

}  // namespace kvshift::kernels
