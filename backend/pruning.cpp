// Pruning scores, selection and compaction; see pruning.hpp.
#include "backend/pruning.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

bool forced(std::int64_t t, std::int64_t T, const KeepPolicy& p) {
  return t < p.sink_tokens || t >= T - p.recent_window;
}

void check_policy(const KeepPolicy& p) {
  if (!(p.retention > 0.0 && p.retention <= 1.0) || p.sink_tokens < 0 || p.recent_window < 0) {
    throw std::invalid_argument("KeepPolicy: retention must be in (0, 1], counts >= 0");
  }
}

/// Higher score first; ties to the earlier token.
struct ByScore {
  const float* s;
  bool operator()(std::int64_t a, std::int64_t b) const {
    return s[a] != s[b] ? s[a] > s[b] : a < b;
  }
};

}  // namespace

const char* budget_name(Budget b) { return b == Budget::kGlobal ? "global" : "per-head"; }

Budget parse_budget(const std::string& name, const std::string& what) {
  for (const Budget b : {Budget::kPerHead, Budget::kGlobal}) {
    if (name == budget_name(b)) return b;
  }
  throw InputError(what + ": \"" + name + "\" is not per-head or global");
}

std::int64_t keep_count(std::int64_t tokens, const KeepPolicy& p) {
  check_policy(p);
  std::int64_t forced_n = 0;
  for (std::int64_t t = 0; t < tokens; ++t) forced_n += forced(t, tokens, p) ? 1 : 0;
  const auto want =
      static_cast<std::int64_t>(std::llround(p.retention * static_cast<double>(tokens)));
  return std::min(tokens, std::max(want, forced_n));
}

std::vector<std::vector<std::int64_t>> top_k_per_head(const Matrix& scores, const KeepPolicy& p) {
  const std::int64_t T = scores.cols();
  const std::int64_t k = keep_count(T, p);
  std::vector<std::vector<std::int64_t>> out(scores.rows());
  for (Eigen::Index h = 0; h < scores.rows(); ++h) {
    const RowVector row = scores.row(h);
    std::vector<std::int64_t>& kept = out[h];
    std::vector<std::int64_t> rest;
    for (std::int64_t t = 0; t < T; ++t) (forced(t, T, p) ? kept : rest).push_back(t);
    const std::int64_t extra = k - static_cast<std::int64_t>(kept.size());
    std::partial_sort(rest.begin(), rest.begin() + extra, rest.end(), ByScore{row.data()});
    kept.insert(kept.end(), rest.begin(), rest.begin() + extra);
    std::sort(kept.begin(), kept.end());
  }
  return out;
}

std::vector<std::vector<std::int64_t>> top_share_global(const Matrix& scores, const KeepPolicy& p) {
  check_policy(p);
  const std::int64_t T = scores.cols(), H = scores.rows();
  const auto budget = static_cast<std::int64_t>(std::llround(p.retention * double(H) * double(T)));
  std::vector<std::vector<std::int64_t>> out(H);
  std::vector<std::int64_t> rest;  // flat index h·T + t
  std::int64_t used = 0;
  for (std::int64_t h = 0; h < H; ++h) {
    for (std::int64_t t = 0; t < T; ++t) {
      if (forced(t, T, p)) {
        out[h].push_back(t);
        ++used;
      } else {
        rest.push_back(h * T + t);
      }
    }
  }
  const std::int64_t extra = std::clamp<std::int64_t>(budget - used, 0, std::ssize(rest));
  std::partial_sort(rest.begin(), rest.begin() + extra, rest.end(), ByScore{scores.data()});
  for (std::int64_t i = 0; i < extra; ++i) out[rest[i] / T].push_back(rest[i] % T);
  for (auto& row : out) std::sort(row.begin(), row.end());
  return out;
}

std::vector<std::vector<std::int64_t>> select_kept(const Matrix& scores, const KeepPolicy& p,
                                                   Budget budget) {
  return budget == Budget::kGlobal ? top_share_global(scores, p) : top_k_per_head(scores, p);
}

Matrix group_reduce(const Matrix& q, int q_heads, int kv_heads, kernels::Reduce how) {
  if (kv_heads <= 0 || q_heads % kv_heads != 0 || q.rows() % q_heads != 0) {
    throw std::invalid_argument("group_reduce: rows must be layers·q_heads");
  }
  Matrix out(q.rows() / q_heads * kv_heads, q.cols());
  kernels::cpu::group_reduce({matrix_view(q), matrix_view(out), how});
  return out;
}

KvCache compact(const KvCache& cache, const std::vector<std::vector<std::int64_t>>& kept,
                int kv_heads, int head_dim) {
  const std::size_t layers = cache.k.size();
  if (kept.size() != layers * kv_heads) {
    throw std::invalid_argument("compact: one kept list per layer and KV head needed");
  }
  const std::size_t n = kept.empty() ? 0 : kept.front().size();
  KvCache out = KvCache::empty(static_cast<int>(layers), std::int64_t{kv_heads} * head_dim);
  out.evicted = cache.evicted + cache.tokens() - static_cast<std::int64_t>(n);
  for (std::size_t l = 0; l < layers; ++l) {
    out.k[l].resize(static_cast<Eigen::Index>(n), kv_heads * head_dim);
    out.v[l].resize(static_cast<Eigen::Index>(n), kv_heads * head_dim);
    for (int h = 0; h < kv_heads; ++h) {
      const auto& idx = kept[l * kv_heads + h];
      if (idx.size() != n) throw std::invalid_argument("compact: unequal kept counts");
      for (std::size_t i = 0; i < n; ++i) {
        if (idx[i] < 0 || idx[i] >= cache.k[l].rows()) {
          throw std::invalid_argument("compact: kept index out of range");
        }
        const auto r = static_cast<Eigen::Index>(i);
        out.k[l].row(r).segment(h * head_dim, head_dim) =
            cache.k[l].row(idx[i]).segment(h * head_dim, head_dim);
        out.v[l].row(r).segment(h * head_dim, head_dim) =
            cache.v[l].row(idx[i]).segment(h * head_dim, head_dim);
      }
    }
  }
  return out;
}

KvCache mask_pruned(const KvCache& cache, const std::vector<std::vector<std::int64_t>>& kept,
                    int kv_heads) {
  const std::size_t layers = cache.k.size();
  if (kept.size() != layers * kv_heads) {
    throw std::invalid_argument("mask_pruned: one kept list per layer and KV head needed");
  }
  if (!cache.key_mask.empty()) throw std::invalid_argument("mask_pruned: the cache is pruned");
  KvCache out = cache;
  const std::int64_t rows = cache.tokens();
  out.key_mask.assign(layers, KeyMask::Zero(rows, kv_heads));
  for (std::size_t l = 0; l < layers; ++l) {
    for (int h = 0; h < kv_heads; ++h) {
      for (const std::int64_t t : kept[l * kv_heads + h]) {
        if (t < 0 || t >= rows) throw std::invalid_argument("mask_pruned: kept index out of range");
        out.key_mask[l](t, h) = 1;
      }
    }
  }
  return out;
}

Matrix h2o_scores(const AttentionStats& stats, const cost_model::ModelSpec& spec) {
  return group_reduce(stats.mass, spec.q_heads, spec.kv_heads, kernels::Reduce::kSum);
}

Matrix avg_pool(const Matrix& x, int kernel) {
  Matrix out(x.rows(), x.cols());
  kernels::cpu::avg_pool({matrix_view(x), matrix_view(out), kernel});
  return out;
}

Matrix snapkv_scores(const AttentionStats& stats, const cost_model::ModelSpec& spec,
                     int pool_kernel) {
  return avg_pool(
      group_reduce(stats.window_mass, spec.q_heads, spec.kv_heads, kernels::Reduce::kSum),
      pool_kernel);
}

Matrix repeat_max_attention(const Model& model, std::span<const std::int32_t> context,
                            KvCache& cache, std::span<const std::int32_t> repeat_prompt,
                            std::int64_t chunk) {
  const auto& m = model.spec();
  const std::int64_t n = cache.tokens();
  if (static_cast<std::int64_t>(context.size()) != n || chunk <= 0) {
    throw std::invalid_argument("repeat_max_attention: the cache must hold exactly the context");
  }
  Matrix scores = Matrix::Zero(static_cast<Eigen::Index>(m.layers) * m.q_heads, n);
  for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
    const std::int64_t len = std::min(chunk, n - c0);
    std::vector<std::int32_t> input(repeat_prompt.begin(), repeat_prompt.end());
    if (c0 > 0) {
      const std::int64_t from = std::max<std::int64_t>(0, c0 - 8);
      input.insert(input.end(), context.begin() + from, context.begin() + c0);
    }
    input.insert(input.end(), context.begin() + c0, context.begin() + c0 + len);
    const ForwardResult r =
        model.forward(input, cache, {.logits = LogitsMode::kNone, .stats = {.max = true}});
    for (auto& k : cache.k) k.conservativeResize(n, Eigen::NoChange);
    for (auto& v : cache.v) v.conservativeResize(n, Eigen::NoChange);
    scores.middleCols(c0, len) = r.stats.max.middleCols(c0, len);
  }
  return scores;
}

Matrix kvzip_scores(const Model& model, std::span<const std::int32_t> context, KvCache& cache,
                    std::span<const std::int32_t> repeat_prompt, std::int64_t chunk) {
  const auto& m = model.spec();
  return group_reduce(repeat_max_attention(model, context, cache, repeat_prompt, chunk), m.q_heads,
                      m.kv_heads, kernels::Reduce::kMax);
}

Matrix continuation_scores(const Model& model, KvCache& cache,
                           std::span<const std::int32_t> continuation) {
  const auto& m = model.spec();
  const std::int64_t n = cache.tokens();
  if (continuation.empty() || n == 0 || !cache.key_mask.empty() || cache.evicted != 0) {
    throw std::invalid_argument(
        "continuation_scores: needs a continuation and a full, unpruned cache");
  }
  const ForwardResult r =
      model.forward(continuation, cache, {.logits = LogitsMode::kNone, .stats = {.max = true}});
  for (auto& k : cache.k) k.conservativeResize(n, Eigen::NoChange);
  for (auto& v : cache.v) v.conservativeResize(n, Eigen::NoChange);
  return group_reduce(r.stats.max.leftCols(n), m.q_heads, m.kv_heads, kernels::Reduce::kMax);
}

}  // namespace kvshift::backend
