// CPU forward pass; see model.hpp.
#include "backend/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include "cost_model/input_error.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

void append_rows(Matrix& m, const Matrix& rows) {
  const Eigen::Index old = m.rows();
  if (old == 0) {
    m = rows;
    return;
  }
  m.conservativeResize(old + rows.rows(), Eigen::NoChange);
  m.bottomRows(rows.rows()) = rows;
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

Model::Model(ModelWeights weights) : w_(std::move(weights)) {}

KvCache Model::new_cache() const {
  return KvCache::empty(spec().layers, std::int64_t{spec().kv_heads} * spec().head_dim);
}

/// `rows0` is the rows the cache holds before this pass: the causal mask counts rows, RoPE
/// counts positions (rows0 + cache.evicted).
void Model::project_qkv(const LayerWeights& w, const Matrix& h, Matrix& q, Matrix& k,
                        Matrix& v) const {
  q.noalias() = h * w.wq.transpose();
  k.noalias() = h * w.wk.transpose();
  v.noalias() = h * w.wv.transpose();
  if (w.bq.size()) {
    q.rowwise() += w.bq;
    k.rowwise() += w.bk;
    v.rowwise() += w.bv;
  }
}

void Model::finish_layer(const LayerWeights& w, const Matrix& attn, Matrix& x) const {
  const auto& m = spec();
  x.noalias() += attn * w.wo.transpose();
  const Matrix h = rms_norm(x, w.mlp_norm, m.rms_eps);
  Matrix gate = h * w.w_gate.transpose();
  const Matrix up = h * w.w_up.transpose();
  kernels::cpu::swiglu({matrix_view(gate), matrix_view(up), matrix_view(gate)});
  x.noalias() += gate * w.w_down.transpose();
}

void Model::layer_forward(int l, Matrix& x, KvCache& cache, std::int64_t rows0,
                          const ForwardOptions& o, ForwardResult& r) const {
  const auto& m = spec();
  const LayerWeights& w = w_.layers[l];
  Matrix h = rms_norm(x, w.attn_norm, m.rms_eps);
  Matrix q, k, v;
  project_qkv(w, h, q, k, v);
  if (o.capture_pre_rope_keys) r.pre_rope_keys[l] = k;
  if (o.capture_attn_inputs) r.attn_inputs[l] = std::move(h);
  const std::int64_t pos0 = rows0 + cache.evicted;
  rope(q, m.q_heads, m, pos0);
  rope(k, m.kv_heads, m, pos0);
  append_rows(cache.k[l], k);
  append_rows(cache.v[l], v);
  append_kept(cache, l, k.rows());
  Matrix attn;
  causal_attention(q, cache.k[l], cache.v[l], m, attn, o.stats.any() ? &r.stats : nullptr, l,
                   mask_of(cache, l));
  finish_layer(w, attn, x);
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
  Matrix q, k, v, attn(batch, std::int64_t{m.q_heads} * m.head_dim), one;
  for (int l = 0; l < m.layers; ++l) {
    const LayerWeights& w = w_.layers[l];
    project_qkv(w, rms_norm(x, w.attn_norm, m.rms_eps), q, k, v);
    for (Eigen::Index b = 0; b < batch; ++b) {
      KvCache& cache = *caches[static_cast<std::size_t>(b)];
      const std::int64_t r0 = rows0[static_cast<std::size_t>(b)];
      Matrix qb = q.row(b), kb = k.row(b);
      rope(qb, m.q_heads, m, r0 + cache.evicted);
      rope(kb, m.kv_heads, m, r0 + cache.evicted);
      append_rows(cache.k[l], kb);
      append_rows(cache.v[l], v.row(b));
      append_kept(cache, l, 1);
      causal_attention(qb, cache.k[l], cache.v[l], m, one, nullptr, 0, mask_of(cache, l));
      attn.row(b) = one;
    }
    finish_layer(w, attn, x);
  }
  Matrix logits;
  logits.noalias() = rms_norm(x, w_.final_norm, m.rms_eps) * w_.output().transpose();
  return logits;
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
  kernels::cpu::apply_threads();
  ForwardResult unused;
  for (int l = first; l < last; ++l) layer_forward(l, x, cache, pos0, {}, unused);
}

ForwardResult Model::forward(std::span<const std::int32_t> tokens, KvCache& cache,
                             const ForwardOptions& o) const {
  kernels::cpu::apply_threads();
  const auto& m = spec();
  const std::int64_t pos0 = cached_tokens(cache, 0, m.layers, "forward");
  const auto n = static_cast<Eigen::Index>(tokens.size());
  Matrix x = embed_tokens(tokens);
  ForwardResult r;
  if (o.capture_attn_inputs) r.attn_inputs.resize(m.layers);
  if (o.capture_pre_rope_keys) r.pre_rope_keys.resize(m.layers);
  if (o.stats.any()) size_stats(r.stats, m, pos0 + n, o.stats);
  for (int l = 0; l < m.layers; ++l) layer_forward(l, x, cache, pos0, o, r);
  if (o.logits == LogitsMode::kNone || n == 0) return r;
  const Matrix last = o.logits == LogitsMode::kLast ? Matrix(x.bottomRows(1)) : x;
  r.logits.noalias() = rms_norm(last, w_.final_norm, m.rms_eps) * w_.output().transpose();
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
          bool inverse) {
  if (x.cols() != std::int64_t{heads} * spec.head_dim) {
    throw std::invalid_argument("rope: x has " + std::to_string(x.cols()) + " columns, expected " +
                                std::to_string(heads) + " heads of " +
                                std::to_string(spec.head_dim));
  }
  if (x.rows() == 0) return;
  const kernels::TensorView v = head_view(x, heads);
  kernels::cpu::rope({.x = v,
                      .out = v,
                      .theta = spec.rope_theta,
                      .position_offset = first_position,
                      .inverse = inverse});
}

void causal_attention(const Matrix& q, const Matrix& k, const Matrix& v,
                      const cost_model::ModelSpec& m, Matrix& out, AttentionStats* stats, int layer,
                      const KeyMask* key_mask) {
  out.resize(q.rows(), q.cols());
  if (q.rows() == 0) return;
  if (key_mask && (key_mask->rows() != k.rows() || key_mask->cols() != m.kv_heads)) {
    throw std::invalid_argument("causal_attention: the key mask must be [keys, kv_heads]");
  }
  if (stats) {
    bool any = false;
    for (const Matrix* stat : {&stats->mass, &stats->window_mass, &stats->max}) {
      if (stat->size() == 0) continue;
      if (stat->cols() != k.rows() || stat->rows() < std::int64_t{layer + 1} * m.q_heads) {
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
  const kernels::TensorView q3 = head_view(q, m.q_heads), k3 = head_view(k, m.kv_heads);
  Matrix lse;
  if (stats) lse.resize(q.rows(), m.q_heads);
  kernels::cpu::attention(
      {.q = q3,
       .k = k3,
       .v = head_view(v, m.kv_heads),
       .out = head_view(out, m.q_heads),
       .lse = stats ? matrix_view(lse) : kernels::TensorView{},
       .key_mask = key_mask ? kernels::make_view(const_cast<std::int32_t*>(key_mask->data()),
                                                 kernels::DType::kI32, kernels::Device::kHost,
                                                 {key_mask->rows(), key_mask->cols()})
                            : kernels::TensorView{}});
  if (!stats) return;
  using kernels::Reduce;
  const std::int64_t window_begin = std::max<std::int64_t>(0, q.rows() - stats->window);
  for (const auto& [stat, begin, reduce] : {std::tuple{&stats->mass, std::int64_t{0}, Reduce::kSum},
                                            {&stats->window_mass, window_begin, Reduce::kSum},
                                            {&stats->max, std::int64_t{0}, Reduce::kMax}}) {
    if (stat->size() == 0) continue;
    kernels::cpu::attention_mass({.q = q3,
                                  .k = k3,
                                  .lse = matrix_view(lse),
                                  .out = layer_rows(*stat, layer, m.q_heads),
                                  .query_begin = begin,
                                  .reduce = reduce});
  }
}

Matrix pre_rope_keys(const KvCache& cache, int layer, const cost_model::ModelSpec& spec) {
  Matrix k = cache.k.at(layer);
  rope(k, spec.kv_heads, spec, 0, true);
  return k;
}

}  // namespace kvshift::backend
