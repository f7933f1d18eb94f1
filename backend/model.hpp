// The CPU reference forward pass of a Llama-family decoder, in fp32 with Eigen:
// embedding, RMSNorm, Q/K/V with GQA (+ Qwen2 biases), half-split RoPE, causal
// attention, o_proj, SwiGLU MLP, residuals, final norm, logits; and Gemma 3's
// variant (decoder_program.hpp: QK norm, norms after each sublayer, GeGLU,
// scaled embeddings, sliding-window layers with their own RoPE base). Each layer and
// the head are the decoder program (decoder_program.hpp, the one GpuModel runs
// on the CUDA kernels) on the CPU twins (kernels/cpu.hpp): Eigen GEMMs on views
// of the weights, the other ops on views of the same matrices.
//
// A forward runs new tokens on top of whatever the KvCache already holds
// (positions continue from cache.tokens()), so the same call is a prefill
// (empty cache; token replay), a continuation, or — after replacing some
// layers of a history cache, e.g. with RISK-KV reconstructions — a quality
// probe. Hooks capture each layer's normalised attention input (the RISK-KV
// ridge label), its pre-RoPE keys, and per-key attention statistics.
// decode_step() is one step of a serving batch: the linear layers run over
// the batch's rows at once, attention per request over its own cache.
// Leaves out: sampling, rope scaling.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/decoder_program.hpp"
#include "backend/tensor.hpp"
#include "backend/weights.hpp"

namespace kvshift::backend {

/// Per-key attention statistics of one forward pass, one row per (layer, query head):
/// row = layer·q_heads + head, one column per key (history + new tokens). Each is a
/// kernels::cpu::attention_mass of the pass; one not asked for stays empty.
struct AttentionStats {
  Matrix mass;  ///< Σ over the new queries of the weight each key receives (H2O, proxy features)
  Matrix window_mass;  ///< the same over the last `window` new queries only (SnapKV)
  Matrix max;          ///< max weight any new query gives the key (KVZip)
  int window = 0;
};

/// Which keys each KV head attends to: [tokens, kv_heads], 0 = dropped for that head.
using KeyMask = Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Per-layer KV cache of one request. Keys are stored post-RoPE (as attention uses
/// them); row t of every layer is the token at position t.
struct KvCache {
  std::vector<Matrix> k;  ///< per layer [tokens, kv_heads·head_dim], post-RoPE
  std::vector<Matrix> v;  ///< per layer [tokens, kv_heads·head_dim]
  /// Tokens dropped from every row set by pruning (compact): the kept keys keep their
  /// positions, so new tokens continue at tokens() + evicted, not at tokens().
  std::int64_t evicted = 0;
  /// Per layer, empty when every head attends to every key: pruning whose budget differs per
  /// head (mask_pruned) keeps all rows and drops keys per head here; rows appended later count.
  std::vector<KeyMask> key_mask;
  /// Tokens held (0 for an empty cache).
  std::int64_t tokens() const { return k.empty() ? 0 : k.front().rows(); }
  /// Position of the next token appended.
  std::int64_t next_position() const { return tokens() + evicted; }
  /// An empty cache with `layers` layers of width `width`.
  static KvCache empty(int layers, std::int64_t width);
};

/// Which logits a forward computes.
enum class LogitsMode { kNone, kLast, kAll };

/// Which attention statistics a forward collects: each costs one more pass over q·kᵀ (the
/// window's only over its last `window` queries), so callers ask for what they use.
struct StatsRequest {
  bool mass = false;         ///< AttentionStats::mass (H2O, ProxyKV features)
  bool window_mass = false;  ///< AttentionStats::window_mass (SnapKV)
  bool max = false;          ///< AttentionStats::max (KVZip)
  int window = 32;           ///< queries counted in window_mass
  bool any() const { return mass || window_mass || max; }
};

struct ForwardOptions {
  LogitsMode logits = LogitsMode::kAll;
  bool capture_attn_inputs = false;    ///< fill ForwardResult::attn_inputs
  bool capture_pre_rope_keys = false;  ///< fill ForwardResult::pre_rope_keys
  StatsRequest stats;                  ///< fill these of ForwardResult::stats
};

struct ForwardResult {
  Matrix logits;                      ///< [new tokens (kAll) | 1 (kLast) | 0, vocab]
  std::vector<Matrix> attn_inputs;    ///< per layer [new tokens, hidden]: RMSNorm(x) before Q/K/V
  std::vector<Matrix> pre_rope_keys;  ///< per layer [new tokens, kv_heads·head_dim] (bias included)
  AttentionStats stats;               ///< rows layer·q_heads + head, columns = all keys
};

class Model {
 public:
  explicit Model(ModelWeights weights);

  const cost_model::ModelSpec& spec() const { return w_.spec; }
  const ModelWeights& weights() const { return w_; }
  /// An empty cache shaped for this model.
  KvCache new_cache() const;
  /// The residual stream's first rows: each token's embedding (Gemma: scaled by √hidden).
  /// Token ids are checked against the vocabulary (InputError).
  Matrix embed_tokens(std::span<const std::int32_t> tokens) const;

  /// Runs `tokens` after the cache's contents and appends their K/V to `cache`.
  /// Token ids are checked against the vocabulary (InputError). From position 0, a model
  /// whose sequences open with BOS (spec.bos_token, Gemma 3) reads BOS as the first token.
  ForwardResult forward(std::span<const std::int32_t> tokens, KvCache& cache,
                        const ForwardOptions& options = {}) const;

  /// One decode step of a batch: token `tokens[b]` is appended to `*caches[b]` (caches may
  /// hold different token counts) and the returned logits [batch, vocab] are each request's
  /// next-token logits. Equals one forward per request of its single token.
  Matrix decode_step(std::span<const std::int32_t> tokens, std::span<KvCache* const> caches) const;

  /// Resumes a forward pass mid-model: runs layers [first, last) over the residual rows `x`
  /// (the stream entering layer `first`, e.g. kept from an earlier pass) of new tokens that
  /// follow the cache's contents, appending their K/V to those layers of `cache`. Layers
  /// outside [first, last) are neither read nor changed.
  void run_layers(int first, int last, Matrix& x, KvCache& cache) const;

  /// Teacher-forced NLL: runs `tokens` on top of `cache` and returns, for i in
  /// [0, n-1), −log p(tokens[i+1] | cache, tokens[0..i]) — n−1 values, in nats.
  /// To score E tokens that follow a history of H tokens, pass a cache of the first
  /// H−1 tokens and tokens = [history's last token, the E tokens].
  std::vector<double> teacher_forced_nll(std::span<const std::int32_t> tokens,
                                         KvCache& cache) const;

 private:
  struct PassBuffers;  ///< one pass's activations, shared by its layers
  std::int64_t cached_tokens(const KvCache& cache, int first, int last, const char* what) const;
  /// Layer l's weights as the decoder program reads them, its projections writing into `b`.
  DecoderLayerWeights layer_weights(int l, PassBuffers& b) const;
  void layer_forward(int l, Matrix& x, KvCache& cache, std::int64_t rows0, const ForwardOptions& o,
                     ForwardResult& r, PassBuffers& b) const;
  /// Refuses a pruned cache in a sliding-window layer (InputError).
  void check_window(const KvCache& cache, int l) const;
  /// Layer l's bias + RoPE + scatter of z's q|k|v columns into `qkv` ([requests, tokens,
  /// heads, head_dim] each), the first token at `position`.
  kernels::EpilogueDesc epilogue(int l, const kernels::TensorView& z,
                                 std::array<kernels::TensorView, 3> qkv,
                                 std::int64_t position) const;
  /// Logits [rows, vocab] of residual rows x through the final norm and the head.
  Matrix logits_of(const Matrix& x) const;

  ModelWeights w_;
  std::vector<Vector> qkv_bias_;  ///< per layer [q|k|v] (empty without attention biases)
};

/// −log softmax(logits[i])[targets[i]] for each row i (computed in double).
std::vector<double> next_token_nll(const Matrix& logits, std::span<const std::int32_t> targets);

/// RMSNorm of each row of x with weight `w` (kernels::cpu::rms_norm).
Matrix rms_norm(const Matrix& x, const Vector& w, double eps);

/// out = causal GQA attention (kernels::cpu::attention) of q [T, q_heads·head_dim] over k, v
/// [keys, kv_heads·head_dim] whose last T rows are q's own tokens. With `stats`, fills layer
/// `layer`'s rows of each statistic that is sized (for all layers and these keys). With
/// `key_mask` [keys, kv_heads], a key marked 0 takes no part for that KV head (no statistics
/// then: they would describe another cache).
void causal_attention(const Matrix& q, const Matrix& k, const Matrix& v,
                      const cost_model::ModelSpec& spec, Matrix& out,
                      AttentionStats* stats = nullptr, int layer = 0,
                      const KeyMask* key_mask = nullptr);

/// Rotates x [tokens, heads·head_dim] in place by layer `layer`'s RoPE (kernels::cpu::rope), row
/// r at position first_position + r; `inverse` undoes it. layer −1: the model's one base, for
/// models whose layers share it (std::invalid_argument otherwise).
void rope(Matrix& x, int heads, const cost_model::ModelSpec& spec, std::int64_t first_position,
          bool inverse = false, int layer = -1);

/// Layer `layer`'s keys with RoPE undone: [tokens, kv_heads·head_dim] (a cache holding every
/// token from position 0: not a pruned one).
Matrix pre_rope_keys(const KvCache& cache, int layer, const cost_model::ModelSpec& spec);

}  // namespace kvshift::backend
