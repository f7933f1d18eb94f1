// CPU forward pass; see model.hpp.
#include "backend/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include "backend/decoder_program.hpp"
#include "cost_model/input_error.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

using kernels::TensorView;

/// Adds `rows` rows to m (their values are written next) and returns a view of them.
TensorView grow_rows(Matrix& m, Eigen::Index rows) {
  m.conservativeResize(m.rows() + rows, Eigen::NoChange);
  return kernels::slice(matrix_view(m), 0, m.rows() - rows, rows);
}

/// A [1, rows, heads, head_dim] view of a [rows, heads·head_dim] one: the epilogue's
/// destination layout for one request.
TensorView one_request(const TensorView& rows, std::int64_t heads) {
  const std::int64_t hd = rows.shape[1] / heads;
  TensorView v = rows;
  v.rank = 4;
  v.shape = {1, rows.shape[0], heads, hd, 0, 0};
  v.stride = {rows.shape[0] * rows.stride[0], rows.stride[0], hd, 1, 0, 0};
  return v;
}

/// [rows, heads·head_dim] as [rows, heads, head_dim].
TensorView heads_of(const TensorView& rows, std::int64_t heads) {
  TensorView v = rows;
  v.rank = 3;
  v.shape = {rows.shape[0], heads, rows.shape[1] / heads, 0, 0, 0};
  v.stride = {rows.stride[0], rows.shape[1] / heads, 1, 0, 0, 0};
  return v;
}

TensorView vector_view(const Vector& v) {
  return kernels::make_view(const_cast<float*>(v.data()), kernels::DType::kF32,
                            kernels::Device::kHost, {v.size()});
}

/// Extends layer l's key mask (if the cache has one) over `rows` appended rows: they count.
void append_kept(KvCache& cache, int l, Eigen::Index rows) {
  if (cache.key_mask.empty()) return;
  KeyMask& mask = cache.key_mask[static_cast<std::size_t>(l)];
  mask.conservativeResize(mask.rows() + rows, Eigen::NoChange);
  mask.bottomRows(rows).setOnes();
}

/// Layer l's key mask, or null when every key counts.
const KeyMask* mask_of(const KvCache& cache, int l) {
  return cache.key_mask.empty() ? nullptr : &cache.key_mask[static_cast<std::size_t>(l)];
}

void size_stats(AttentionStats& s, const cost_model::ModelSpec& m, Eigen::Index keys,
                const StatsRequest& want) {
  const Eigen::Index rows = static_cast<Eigen::Index>(m.layers) * m.q_heads;
  if (want.mass) s.mass = Matrix::Zero(rows, keys);
  if (want.window_mass) s.window_mass = Matrix::Zero(rows, keys);
  if (want.max) s.max = Matrix::Zero(rows, keys);
  s.window = want.window;
}

/// Rows [layer·heads, (layer + 1)·heads) of a statistics matrix: [heads, keys].
kernels::TensorView layer_rows(const Matrix& stat, int layer, int heads) {
  const std::int64_t cols = stat.cols();
  return kernels::make_view(const_cast<float*>(stat.data()) + std::int64_t{layer} * heads * cols,
                            kernels::DType::kF32, kernels::Device::kHost, {heads, cols});
}

/// causal_attention's ops, checked: the attention and, with `stats`, the mass of each
/// statistic asked for into layer `layer`'s rows (lse is sized for them).
struct AttentionOps {
  kernels::AttentionDesc attention;
  std::vector<kernels::AttentionMassDesc> masses;
};

AttentionOps attention_ops(const TensorView& q, const TensorView& k, const TensorView& v,
                           const TensorView& out, const cost_model::ModelSpec& m,
                           AttentionStats* stats, int layer, const KeyMask* key_mask, Matrix& lse) {
  const std::int64_t keys = k.shape[0];
  if (key_mask && (key_mask->rows() != keys || key_mask->cols() != m.kv_heads)) {
    throw std::invalid_argument("causal_attention: the key mask must be [keys, kv_heads]");
  }
  const std::int64_t window = m.is_sliding(layer) ? m.sliding_window : 0;
  if (window > 0 && key_mask) {
    throw InputError("model " + m.name +
                     ": a cache pruned per head (key mask) in a sliding-window layer is not "
                     "supported");
  }
  if (stats) {
    bool any = false;
    for (const Matrix* stat : {&stats->mass, &stats->window_mass, &stats->max}) {
      if (stat->size() == 0) continue;
      if (stat->cols() != keys || stat->rows() < std::int64_t{layer + 1} * m.q_heads) {
        throw std::invalid_argument("causal_attention: statistics not sized for this pass");
      }
      any = true;
    }
    if (!any) stats = nullptr;
    if (stats && key_mask) {
      throw std::invalid_argument(
          "causal_attention: no attention statistics over a cache pruned per head (key mask)");
    }
  }
  if (stats && (lse.rows() != q.shape[0] || lse.cols() != m.q_heads))
    lse.resize(q.shape[0], m.q_heads);
  AttentionOps ops;
  ops.attention = {
      .q = q,
      .k = k,
      .v = v,
      .out = out,
      .lse = stats ? matrix_view(lse) : TensorView{},
      .scale = static_cast<float>(m.query_scale),
      .key_mask = key_mask ? kernels::make_view(const_cast<std::int32_t*>(key_mask->data()),
                                                kernels::DType::kI32, kernels::Device::kHost,
                                                {key_mask->rows(), key_mask->cols()})
                           : TensorView{},
      .window = window};
  if (!stats) return ops;
  using kernels::Reduce;
  const std::int64_t window_begin = std::max<std::int64_t>(0, q.shape[0] - stats->window);
  for (const auto& [stat, begin, reduce] : {std::tuple{&stats->mass, std::int64_t{0}, Reduce::kSum},
                                            {&stats->window_mass, window_begin, Reduce::kSum},
                                            {&stats->max, std::int64_t{0}, Reduce::kMax}}) {
    if (stat->size() == 0) continue;
    ops.masses.push_back({.q = q,
                          .k = k,
                          .lse = matrix_view(lse),
                          .out = layer_rows(*stat, layer, m.q_heads),
                          .scale = static_cast<float>(m.query_scale),
                          .query_begin = begin,
                          .reduce = reduce,
                          .window = window});
  }
  return ops;
}

}  // namespace

KvCache KvCache::empty(int layers, std::int64_t width) {
  KvCache c;
  c.k.assign(layers, Matrix(0, width));
  c.v.assign(layers, Matrix(0, width));
  return c;
}

Matrix rms_norm(const Matrix& x, const Vector& w, double eps) {
  Matrix out(x.rows(), x.cols());
  if (x.rows() == 0) return out;
  kernels::cpu::rms_norm(
      {.x = matrix_view(x),
       .weight = kernels::make_view(const_cast<float*>(w.data()), kernels::DType::kF32,
                                    kernels::Device::kHost, {w.size()}),
       .out = matrix_view(out),
       .eps = static_cast<float>(eps)});
  return out;
}

Model::Model(ModelWeights weights) : w_(std::move(weights)) {
  // The epilogue adds one [q|k|v] bias (Qwen2's); the weights keep theirs apart.
  for (const LayerWeights& l : w_.layers) {
    Vector& bias = qkv_bias_.emplace_back();
    if (!l.bq.size()) continue;
    bias.resize(l.bq.size() + l.bk.size() + l.bv.size());
    bias << l.bq.transpose(), l.bk.transpose(), l.bv.transpose();
  }
}

KvCache Model::new_cache() const {
  return KvCache::empty(spec().layers, std::int64_t{spec().kv_heads} * spec().head_dim);
}

/// The activations of one pass of `rows` rows, shared by its layers.
struct Model::PassBuffers {
  PassBuffers(const cost_model::ModelSpec& m, Eigen::Index rows, bool lse_needed)
      : h(rows, m.hidden),
        z(rows, std::int64_t{m.q_heads + 2 * m.kv_heads} * m.head_dim),
        q(rows, std::int64_t{m.q_heads} * m.head_dim),
        attn(rows, std::int64_t{m.q_heads} * m.head_dim),
        gate(rows, m.intermediate),
        up(rows, m.intermediate),
        lse(lse_needed ? rows : 0, m.q_heads) {}
  Matrix h, z, q, attn, gate, up, lse;
};

DecoderLayerWeights Model::layer_weights(int l, PassBuffers& b) const {
  const auto& m = spec();
  const LayerWeights& w = w_.layers[static_cast<std::size_t>(l)];
  const std::int64_t qd = std::int64_t{m.q_heads} * m.head_dim;
  const std::int64_t kvd = std::int64_t{m.kv_heads} * m.head_dim;
  const TensorView z = matrix_view(b.z);
  return {.attn_norm = vector_view(w.attn_norm),
          .mlp_norm = vector_view(w.mlp_norm),
          .qkv = {{matrix_view(w.wq), kernels::slice(z, 1, 0, qd)},
                  {matrix_view(w.wk), kernels::slice(z, 1, qd, kvd)},
                  {matrix_view(w.wv), kernels::slice(z, 1, qd + kvd, kvd)}},
          .wo = matrix_view(w.wo),
          .gate_up = {{matrix_view(w.w_gate), matrix_view(b.gate)},
                      {matrix_view(w.w_up), matrix_view(b.up)}},
          .w_down = matrix_view(w.w_down),
          .post_attn_norm = m.gemma ? vector_view(w.post_attn_norm) : TensorView{},
          .post_mlp_norm = m.gemma ? vector_view(w.post_mlp_norm) : TensorView{},
          .act = m.gemma ? kernels::SwigluDesc::Act::kGeluTanh : kernels::SwigluDesc::Act::kSilu};
}

/// Gemma's sliding windows count positions, which the rows of a cache that pruning compacted no
/// longer are.
void Model::check_window(const KvCache& cache, int l) const {
  if (spec().is_sliding(l) && cache.evicted > 0) {
    throw InputError("model " + spec().name + ": layer " + std::to_string(l) +
                     " attends over a sliding window, which a pruned (compacted) cache does not "
                     "support");
  }
}

/// `rows0` is the rows the cache holds before this pass: the causal mask counts rows, RoPE
/// counts positions (rows0 + cache.evicted).
void Model::layer_forward(int l, Matrix& x, KvCache& cache, std::int64_t rows0,
                          const ForwardOptions& o, ForwardResult& r, PassBuffers& b) const {
  const auto& m = spec();
  const Eigen::Index n = x.rows();
  const std::int64_t qd = std::int64_t{m.q_heads} * m.head_dim;
  // The cache grows by the pass's rows first: the epilogue writes their K and V in place.
  check_window(cache, l);
  const TensorView k_new = grow_rows(cache.k[l], n), v_new = grow_rows(cache.v[l], n);
  append_kept(cache, l, n);
  DecoderLayerPass p;
  p.x = matrix_view(x);
  p.h = matrix_view(b.h);
  p.scatter.push_back(epilogue(l, matrix_view(b.z),
                               {one_request(matrix_view(b.q), m.q_heads),
                                one_request(k_new, m.kv_heads), one_request(v_new, m.kv_heads)},
                               rows0 + cache.evicted));
  p.attn = matrix_view(b.attn);
  AttentionOps ops =
      attention_ops(head_view(b.q, m.q_heads), head_view(cache.k[l], m.kv_heads),
                    head_view(cache.v[l], m.kv_heads), head_view(b.attn, m.q_heads), m,
                    o.stats.any() ? &r.stats : nullptr, l, mask_of(cache, l), b.lse);
  p.attention.push_back(ops.attention);
  p.masses = std::move(ops.masses);
  p.gate = p.act = matrix_view(b.gate);
  p.up = matrix_view(b.up);
  p.eps = static_cast<float>(m.rms_eps);
  run_decoder_layer(kernels::cpu::Ops{}, layer_weights(l, b), p, [&] {
    if (o.capture_attn_inputs) r.attn_inputs[l] = b.h;
    if (o.capture_pre_rope_keys) {
      Matrix& keys = r.pre_rope_keys[l];
      keys = b.z.middleCols(qd, std::int64_t{m.kv_heads} * m.head_dim);
      const LayerWeights& w = w_.layers[l];
      if (w.bk.size()) keys.rowwise() += w.bk;
      if (w.k_norm.size()) {  // Gemma: the keys RoPE rotates are normed per head
        const TensorView heads =
            kernels::make_view(keys.data(), kernels::DType::kF32, kernels::Device::kHost,
                               {keys.size() / m.head_dim, m.head_dim});
        kernels::cpu::rms_norm({heads, vector_view(w.k_norm), heads, p.eps});
      }
    }
  });
}

kernels::EpilogueDesc Model::epilogue(int l, const TensorView& z, std::array<TensorView, 3> qkv,
                                      std::int64_t position) const {
  const auto& m = spec();
  const std::int64_t qd = std::int64_t{m.q_heads} * m.head_dim;
  const std::int64_t kvd = std::int64_t{m.kv_heads} * m.head_dim;
  kernels::EpilogueDesc e;
  e.z = z;
  if (const Vector& bias = qkv_bias_[static_cast<std::size_t>(l)]; bias.size()) {
    e.bias = vector_view(bias);
  }
  e.segments = {{0, true, qkv[0]}, {qd, true, qkv[1]}, {qd + kvd, false, qkv[2]}};
  if (const LayerWeights& w = w_.layers[static_cast<std::size_t>(l)]; w.q_norm.size()) {
    for (auto [segment, norm] : {std::pair{0, &w.q_norm}, {1, &w.k_norm}}) {
      e.segments[segment].head_norm = vector_view(*norm);
      e.segments[segment].norm_eps = static_cast<float>(m.rms_eps);
    }
  }
  e.theta = m.rope_theta_of(l);
  e.position_offset = position;
  return e;
}

Matrix Model::logits_of(const Matrix& x) const {
  const auto& m = spec();
  Matrix h(x.rows(), m.hidden), logits(x.rows(), w_.output().rows());
  run_decoder_head(kernels::cpu::Ops{}, vector_view(w_.final_norm), matrix_view(w_.output()),
                   matrix_view(x), matrix_view(h), matrix_view(logits),
                   static_cast<float>(m.rms_eps));
  return logits;
}

Matrix Model::embed_tokens(std::span<const std::int32_t> tokens) const {
  const auto& m = spec();
  Matrix x(static_cast<Eigen::Index>(tokens.size()), m.hidden);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= m.vocab) {
      throw InputError("tokens[" + std::to_string(i) + "]: id " + std::to_string(tokens[i]) +
                       " outside the vocabulary [0, " + std::to_string(m.vocab) + ")");
    }
    x.row(static_cast<Eigen::Index>(i)) = w_.embed.row(tokens[i]);
  }
  if (m.gemma) x *= std::sqrt(static_cast<float>(m.hidden));  // Gemma scales its embeddings
  return x;
}

Matrix Model::decode_step(std::span<const std::int32_t> tokens,
                          std::span<KvCache* const> caches) const {
  if (tokens.size() != caches.size()) {
    throw std::invalid_argument("decode_step: one token per cache needed");
  }
  kernels::cpu::apply_threads();
  const auto& m = spec();
  std::vector<std::int64_t> rows0(caches.size());
  for (std::size_t b = 0; b < caches.size(); ++b) {
    rows0[b] = cached_tokens(*caches[b], 0, m.layers, "decode_step");
  }
  Matrix x = embed_tokens(tokens);
  const auto batch = static_cast<Eigen::Index>(tokens.size());
  if (batch == 0) return Matrix(0, w_.output().rows());
  PassBuffers buffers(m, batch, false);
  const auto row = [](const Matrix& mat, Eigen::Index b) {
    return kernels::slice(matrix_view(mat), 0, b, 1);
  };
  for (int l = 0; l < m.layers; ++l) {
    // The linear layers run over the batch's rows at once; each request's K/V and attention
    // are its own cache's.
    DecoderLayerPass p;
    for (Eigen::Index b = 0; b < batch; ++b) {
      KvCache& cache = *caches[static_cast<std::size_t>(b)];
      check_window(cache, l);
      const TensorView k_new = grow_rows(cache.k[l], 1), v_new = grow_rows(cache.v[l], 1);
      append_kept(cache, l, 1);
      p.scatter.push_back(epilogue(l, row(buffers.z, b),
                                   {one_request(row(buffers.q, b), m.q_heads),
                                    one_request(k_new, m.kv_heads), one_request(v_new, m.kv_heads)},
                                   rows0[static_cast<std::size_t>(b)] + cache.evicted));
      Matrix unused;
      p.attention.push_back(attention_ops(heads_of(row(buffers.q, b), m.q_heads),
                                          head_view(cache.k[l], m.kv_heads),
                                          head_view(cache.v[l], m.kv_heads),
                                          heads_of(row(buffers.attn, b), m.q_heads), m, nullptr, l,
                                          mask_of(cache, l), unused)
                                .attention);
    }
    p.x = matrix_view(x);
    p.h = matrix_view(buffers.h);
    p.attn = matrix_view(buffers.attn);
    p.gate = p.act = matrix_view(buffers.gate);
    p.up = matrix_view(buffers.up);
    p.eps = static_cast<float>(m.rms_eps);
    run_decoder_layer(kernels::cpu::Ops{}, layer_weights(l, buffers), p, [] {});
  }
  return logits_of(x);
}

/// The rows every layer of [first, last) holds (they must agree); `what` names the caller.
std::int64_t Model::cached_tokens(const KvCache& cache, int first, int last,
                                  const char* what) const {
  if (cache.k.size() != static_cast<std::size_t>(spec().layers) ||
      cache.v.size() != cache.k.size()) {
    throw std::invalid_argument(std::string(what) + ": cache has the wrong number of layers");
  }
  const std::int64_t rows = first < last ? cache.k[first].rows() : 0;
  for (int l = first; l < last; ++l) {
    if (cache.k[l].rows() != rows || cache.v[l].rows() != rows) {
      throw std::invalid_argument(std::string(what) + ": cache layer " + std::to_string(l) +
                                  " holds a different number of tokens than layer " +
                                  std::to_string(first));
    }
  }
  return rows;
}

void Model::run_layers(int first, int last, Matrix& x, KvCache& cache) const {
  if (first < 0 || last > spec().layers || first > last || x.cols() != spec().hidden) {
    throw std::invalid_argument("run_layers: bad layer range or residual width");
  }
  const std::int64_t pos0 = cached_tokens(cache, first, last, "run_layers");
  if (x.rows() == 0) return;
  kernels::cpu::apply_threads();
  ForwardResult unused;
  PassBuffers buffers(spec(), x.rows(), false);
  for (int l = first; l < last; ++l) layer_forward(l, x, cache, pos0, {}, unused, buffers);
}

ForwardResult Model::forward(std::span<const std::int32_t> tokens, KvCache& cache,
                             const ForwardOptions& o) const {
  kernels::cpu::apply_threads();
  const auto& m = spec();
  const std::int64_t pos0 = cached_tokens(cache, 0, m.layers, "forward");
  const auto n = static_cast<Eigen::Index>(tokens.size());
  std::vector<std::int32_t> opened;  // the sequence as the model opens it (spec.bos_token)
  if (m.bos_token >= 0 && pos0 + cache.evicted == 0 && n > 0 && tokens[0] != m.bos_token) {
    opened.assign(tokens.begin(), tokens.end());
    opened[0] = m.bos_token;
    tokens = opened;
  }
  Matrix x = embed_tokens(tokens);
  ForwardResult r;
  if (o.capture_attn_inputs) r.attn_inputs.resize(m.layers);
  if (o.capture_pre_rope_keys) r.pre_rope_keys.resize(m.layers);
  if (o.stats.any()) size_stats(r.stats, m, pos0 + n, o.stats);
  if (n == 0) return r;
  PassBuffers buffers(m, n, o.stats.any());
  for (int l = 0; l < m.layers; ++l) layer_forward(l, x, cache, pos0, o, r, buffers);
  if (o.logits == LogitsMode::kNone) return r;
  r.logits = logits_of(o.logits == LogitsMode::kLast ? Matrix(x.bottomRows(1)) : x);
  return r;
}

std::vector<double> Model::teacher_forced_nll(std::span<const std::int32_t> tokens,
                                              KvCache& cache) const {
  if (tokens.size() < 2) return {};
  const ForwardResult r = forward(tokens, cache, {});
  return next_token_nll(r.logits.topRows(r.logits.rows() - 1), tokens.subspan(1));
}

std::vector<double> next_token_nll(const Matrix& logits, std::span<const std::int32_t> targets) {
  if (static_cast<std::size_t>(logits.rows()) != targets.size()) {
    throw std::invalid_argument("next_token_nll: one target per logits row needed");
  }
  std::vector<double> out(targets.size());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const auto row = logits.row(i).cast<double>();
    const double mx = row.maxCoeff();
    const double lse = mx + std::log((row.array() - mx).exp().sum());
    if (targets[i] < 0 || targets[i] >= logits.cols()) {
      throw InputError("target token " + std::to_string(targets[i]) + " outside the vocabulary");
    }
    out[i] = lse - row[targets[i]];
  }
  return out;
}

void rope(Matrix& x, int heads, const cost_model::ModelSpec& spec, std::int64_t first_position,
          bool inverse, int layer) {
  if (layer < 0 && spec.sliding_window > 0) {
    throw std::invalid_argument("rope: model " + spec.name +
                                " has a RoPE base per layer; name the layer");
  }
  if (x.cols() != std::int64_t{heads} * spec.head_dim) {
    throw std::invalid_argument("rope: x has " + std::to_string(x.cols()) + " columns, expected " +
                                std::to_string(heads) + " heads of " +
                                std::to_string(spec.head_dim));
  }
  if (x.rows() == 0) return;
  const kernels::TensorView v = head_view(x, heads);
  kernels::cpu::rope({.x = v,
                      .out = v,
                      .theta = layer < 0 ? spec.rope_theta : spec.rope_theta_of(layer),
                      .position_offset = first_position,
                      .inverse = inverse});
}

void causal_attention(const Matrix& q, const Matrix& k, const Matrix& v,
                      const cost_model::ModelSpec& m, Matrix& out, AttentionStats* stats, int layer,
                      const KeyMask* key_mask) {
  out.resize(q.rows(), q.cols());
  if (q.rows() == 0) return;
  Matrix lse;
  const AttentionOps ops =
      attention_ops(head_view(q, m.q_heads), head_view(k, m.kv_heads), head_view(v, m.kv_heads),
                    head_view(out, m.q_heads), m, stats, layer, key_mask, lse);
  kernels::cpu::attention(ops.attention);
  for (const kernels::AttentionMassDesc& mass : ops.masses) kernels::cpu::attention_mass(mass);
}

Matrix pre_rope_keys(const KvCache& cache, int layer, const cost_model::ModelSpec& spec) {
  Matrix k = cache.k.at(layer);
  rope(k, spec.kv_heads, spec, 0, true, layer);
  return k;
}

}  // namespace kvshift::backend
