// RISK-KV reconstruction op; see reconstruct.hpp.
#include "backend/reconstruct.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

/// Tokens of `layer` (omitted layers may be empty, so do not ask layer 0).
std::int64_t layer_tokens(const KvCache& c, int layer) {
  if (layer < 0 || layer >= static_cast<int>(c.k.size())) {
    throw std::invalid_argument("reconstruct: layer " + std::to_string(layer) + " out of range");
  }
  return c.k[layer].rows();
}

/// RMSNorm of each head_dim-wide head of every row of k (kernels::cpu::rms_norm) with `weight`.
void norm_heads(Matrix& k, const Eigen::Ref<const RowVector>& weight, int head_dim, float eps) {
  if (k.size() == 0) return;
  const RowVector w = weight;
  const kernels::TensorView heads = kernels::make_view(
      k.data(), kernels::DType::kF32, kernels::Device::kHost, {k.size() / head_dim, head_dim});
  kernels::cpu::rms_norm(
      {.x = heads,
       .weight = kernels::make_view(const_cast<float*>(w.data()), kernels::DType::kF32,
                                    kernels::Device::kHost, {w.size()}),
       .out = heads,
       .eps = eps});
}

}  // namespace

GroupPredictor random_predictor(const cost_model::ModelSpec& spec,
                                const cost_model::GroupPlan& plan, std::uint64_t seed) {
  GroupPredictor p;
  p.anchor_layers = plan.anchor_layers;
  p.target_layers = plan.target_layers;
  const std::int64_t w = spec.kv_width();
  const auto in = static_cast<Eigen::Index>(w * plan.anchor_layers.size());
  const auto out = static_cast<Eigen::Index>(w * plan.target_layers.size());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
  p.weight.resize(in, out);
  for (Eigen::Index i = 0; i < p.weight.size(); ++i) p.weight.data()[i] = dist(rng);
  p.bias.resize(out);
  for (Eigen::Index i = 0; i < out; ++i) p.bias[i] = 0.1f * dist(rng);
  if (spec.gemma) {
    p.key_norm = Matrix::Ones(static_cast<Eigen::Index>(plan.target_layers.size()), spec.head_dim);
  }
  return p;
}

Matrix anchor_features(const KvCache& cache, const std::vector<int>& anchor_layers,
                       const cost_model::ModelSpec& spec) {
  const std::int64_t half = spec.kv_width() / 2;
  const std::int64_t T = anchor_layers.empty() ? 0 : layer_tokens(cache, anchor_layers.front());
  Matrix x(T, static_cast<Eigen::Index>(spec.kv_width() * anchor_layers.size()));
  for (std::size_t a = 0; a < anchor_layers.size(); ++a) {
    const int l = anchor_layers[a];
    if (l < 0 || l >= static_cast<int>(cache.k.size()) || cache.k[l].rows() != T ||
        cache.v[l].rows() != T || cache.k[l].cols() != half) {
      throw std::invalid_argument("reconstruct: anchor layer " + std::to_string(l) +
                                  " is missing or has the wrong shape");
    }
    const auto col = static_cast<Eigen::Index>(a * spec.kv_width());
    x.middleCols(col, half) = pre_rope_keys(cache, l, spec);
    x.middleCols(col + half, half) = cache.v[l];
  }
  return x;
}

void reconstruct_group(const GroupPredictor& p, std::span<KvCache* const> caches,
                       const cost_model::ModelSpec& spec) {
  kernels::cpu::apply_threads();
  const std::int64_t w = spec.kv_width(), half = w / 2;
  if (p.weight.rows() != static_cast<Eigen::Index>(w * p.anchor_layers.size()) ||
      p.weight.cols() != static_cast<Eigen::Index>(w * p.target_layers.size()) ||
      p.bias.size() != p.weight.cols() ||
      (p.key_norm.size() &&
       (p.key_norm.rows() != static_cast<Eigen::Index>(p.target_layers.size()) ||
        p.key_norm.cols() != spec.head_dim))) {
    throw std::invalid_argument("reconstruct: predictor shape does not match its layers");
  }
  if (p.sink_rows < 0) throw std::invalid_argument("reconstruct: negative sink_rows");
  if (spec.gemma && !p.key_norm.size()) {
    throw std::invalid_argument("reconstruct: model " + spec.name +
                                " norms its keys; the predictor carries no key norms");
  }
  const int first = p.anchor_layers.empty() ? -1 : p.anchor_layers.front();
  // Per cache: its rows T and the sink rows S it was sent exact; rows [S, T) are rebuilt.
  auto sink = [&](const KvCache& c) {
    return std::min<std::int64_t>(p.sink_rows, layer_tokens(c, first));
  };
  std::int64_t rows = 0;
  for (const KvCache* c : caches) rows += layer_tokens(*c, first) - sink(*c);
  Matrix x(rows, p.weight.rows());
  std::int64_t r = 0;
  for (const KvCache* c : caches) {
    const std::int64_t n = layer_tokens(*c, first) - sink(*c);
    x.middleRows(r, n) = anchor_features(*c, p.anchor_layers, spec).bottomRows(n);
    r += n;
  }
  Matrix z(rows, p.weight.cols());
  kernels::cpu::gemm({.a = matrix_view(x),
                      .b = matrix_view(p.weight),
                      .c = matrix_view(z),
                      .b_transposed = false});
  z.rowwise() += p.bias;
  r = 0;
  for (KvCache* c : caches) {
    const std::int64_t T = layer_tokens(*c, first), S = sink(*c), n = T - S;
    for (std::size_t t = 0; t < p.target_layers.size(); ++t) {
      const int l = p.target_layers[t];
      if (l < 0 || l >= static_cast<int>(c->k.size())) {
        throw std::invalid_argument("reconstruct: target layer out of range");
      }
      if (c->k[l].rows() < S || c->v[l].rows() < S || (S > 0 && c->k[l].cols() != half)) {
        throw std::invalid_argument("reconstruct: layer " + std::to_string(l) + " holds " +
                                    std::to_string(c->k[l].rows()) + " rows; its first " +
                                    std::to_string(S) + " (sink rows) are sent exact");
      }
      const auto col = static_cast<Eigen::Index>(t * w);
      Matrix k(T, half), v(T, half);
      k.topRows(S) = c->k[l].topRows(S);
      v.topRows(S) = c->v[l].topRows(S);
      Matrix rebuilt = z.block(r, col, n, half);
      if (p.key_norm.size())
        norm_heads(rebuilt, p.key_norm.row(static_cast<Eigen::Index>(t)), spec.head_dim,
                   p.norm_eps);
      rope(rebuilt, spec.kv_heads, spec, S, false, l);
      k.bottomRows(n) = rebuilt;
      v.bottomRows(n) = z.block(r, col + half, n, half);
      c->k[l] = std::move(k);
      c->v[l] = std::move(v);
    }
    r += n;
  }
}

void reconstruct(std::span<const GroupPredictor> predictors, std::span<KvCache* const> caches,
                 const cost_model::ModelSpec& spec) {
  for (const GroupPredictor& p : predictors) reconstruct_group(p, caches, spec);
}

}  // namespace kvshift::backend
