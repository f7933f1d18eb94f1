// ProxyKV selection and the baseline scores on hand-checkable cases, and the
// H2O, SnapKV and KVZip scores of a real 2-layer model against attention weights
// computed here by hand (Q from the captured layer inputs, a plain softmax loop
// over q·k in double), independently of the attention kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "backend/pruning.hpp"

namespace kvshift::backend {
namespace {

Matrix random_scores(Eigen::Index rows, Eigen::Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d;
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

TEST(TopK, KeepsExactlyKPerHeadWithSinksAndWindowAlwaysKept) {
  const Matrix s = random_scores(6, 100, 1);
  const KeepPolicy p{.retention = 0.3, .sink_tokens = 4, .recent_window = 8};
  ASSERT_EQ(keep_count(100, p), 30);
  const auto kept = top_k_per_head(s, p);
  ASSERT_EQ(kept.size(), 6u);
  for (Eigen::Index h = 0; h < 6; ++h) {
    const auto& k = kept[h];
    ASSERT_EQ(k.size(), 30u) << h;
    EXPECT_TRUE(std::is_sorted(k.begin(), k.end()));
    const std::set<std::int64_t> set(k.begin(), k.end());
    EXPECT_EQ(set.size(), k.size());
    for (std::int64_t t : {0, 1, 2, 3, 92, 93, 94, 95, 96, 97, 98, 99}) EXPECT_TRUE(set.count(t));
    // every kept non-forced token outscores every dropped one
    float min_kept = 2, max_dropped = -1;
    for (std::int64_t t = 4; t < 92; ++t) {
      if (set.count(t)) {
        min_kept = std::min(min_kept, s(h, t));
      } else {
        max_dropped = std::max(max_dropped, s(h, t));
      }
    }
    EXPECT_GT(min_kept, max_dropped);
  }
}

TEST(TopK, ForcedTokensWinOverTheRetentionBudget) {
  const KeepPolicy p{.retention = 0.1, .sink_tokens = 4, .recent_window = 8};
  EXPECT_EQ(keep_count(20, p), 12);
  EXPECT_EQ(keep_count(10, p), 10);  // sinks and window overlap: everything
  const auto kept = top_k_per_head(random_scores(1, 20, 2), p);
  EXPECT_EQ(kept[0], (std::vector<std::int64_t>{0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19}));
}

TEST(TopK, TiesGoToTheEarlierToken) {
  Matrix s = Matrix::Constant(1, 10, 0.5f);
  const auto kept = top_k_per_head(s, {.retention = 0.4, .sink_tokens = 1, .recent_window = 1});
  EXPECT_EQ(kept[0], (std::vector<std::int64_t>{0, 1, 2, 9}));
}

TEST(TopShareGlobal, KeepsTheGlobalBudgetAndTheForcedTokensOfEveryHead) {
  Matrix s = random_scores(4, 50, 3);
  s.row(2).array() += 10.0f;  // head 2 dominates the global ranking
  const KeepPolicy p{.retention = 0.25, .sink_tokens = 2, .recent_window = 2};
  const auto kept = top_share_global(s, p);
  std::size_t total = 0;
  for (const auto& k : kept) {
    total += k.size();
    EXPECT_EQ(k[0], 0);
    EXPECT_EQ(k.back(), 49);
  }
  EXPECT_EQ(total, 50u);  // round(0.25 · 4 · 50)
  EXPECT_EQ(kept[2].size(), 50u - 3 * 4);
}

TEST(Compact, KeepsEachHeadsOwnTokens) {
  KvCache c = KvCache::empty(1, 2 * 2);  // 1 layer, 2 KV heads of dim 2
  c.k[0].resize(4, 4);
  c.v[0].resize(4, 4);
  for (int t = 0; t < 4; ++t) {
    c.k[0].row(t) << t, t, 10 + t, 10 + t;
    c.v[0].row(t) << -t, -t, -10 - t, -10 - t;
  }
  const KvCache out = compact(c, {{0, 3}, {1, 2}}, 2, 2);
  EXPECT_EQ(out.tokens(), 2);
  EXPECT_EQ(out.k[0], (Matrix(2, 4) << 0, 0, 11, 11, 3, 3, 12, 12).finished());
  EXPECT_EQ(out.v[0], (Matrix(2, 4) << 0, 0, -11, -11, -3, -3, -12, -12).finished());
  EXPECT_THROW(compact(c, {{0, 3}, {1}}, 2, 2), std::invalid_argument);
}

TEST(MaskPruned, MarksEachHeadsOwnTokensAndKeepsEveryRow) {
  KvCache c = KvCache::empty(2, 2 * 2);  // 2 layers, 2 KV heads of dim 2
  for (Matrix& m : c.k) m = random_scores(5, 4, 3);
  for (Matrix& m : c.v) m = random_scores(5, 4, 4);
  const KvCache out = mask_pruned(c, {{0, 3}, {1, 2, 4}, {0}, {0, 1, 2, 3, 4}}, 2);
  EXPECT_EQ(out.tokens(), 5);
  EXPECT_EQ(out.evicted, 0);
  EXPECT_EQ(out.k[1], c.k[1]);
  ASSERT_EQ(out.key_mask.size(), 2u);
  EXPECT_EQ(out.key_mask[0], (KeyMask(5, 2) << 1, 0, 0, 1, 0, 1, 1, 0, 0, 1).finished());
  EXPECT_EQ(out.key_mask[1], (KeyMask(5, 2) << 1, 1, 0, 1, 0, 1, 0, 1, 0, 1).finished());
  EXPECT_THROW(mask_pruned(c, {{0}, {1}}, 2), std::invalid_argument);
  EXPECT_THROW(mask_pruned(c, {{0}, {5}, {0}, {0}}, 2), std::invalid_argument);
  EXPECT_THROW(mask_pruned(out, {{0}, {1}, {0}, {0}}, 2), std::invalid_argument);
}

/// Next-token logits of `tail` fed onto `cache` (the tiny Qwen2 fixture).
Matrix logits_after(const Model& model, KvCache cache, const std::vector<std::int32_t>& tail) {
  return model.forward(tail, cache, {.logits = LogitsMode::kAll}).logits;
}

// Metamorphic: with the same count per head, dropping keys by the mask and compacting them
// away are the same attention, so the eval tokens' logits agree (to float reassociation);
// an all-kept mask is the exact cache bit for bit. Decoding on a masked cache extends it.
TEST(MaskPruned, EqualBudgetsMatchCompactionAndAllKeptMatchesExact) {
  const Model model(load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_qwen2"));
  const auto& m = model.spec();
  std::vector<std::int32_t> ctx, tail;
  for (int i = 0; i < 40; ++i) ctx.push_back((i * 37 + 5) % 96);
  for (int i = 0; i < 6; ++i) tail.push_back((i * 13 + 2) % 96);
  KvCache cache = model.new_cache();
  model.forward(ctx, cache, {.logits = LogitsMode::kNone});
  const Matrix scores = random_scores(m.layers * m.kv_heads, 40, 17);
  const auto kept =
      top_k_per_head(scores, {.retention = 0.4, .sink_tokens = 2, .recent_window = 4});
  const Matrix by_mask = logits_after(model, mask_pruned(cache, kept, m.kv_heads), tail);
  const Matrix by_compaction =
      logits_after(model, compact(cache, kept, m.kv_heads, m.head_dim), tail);
  ASSERT_EQ(by_mask.rows(), 6);
  EXPECT_LT((by_mask - by_compaction).norm(), 1e-5 * by_compaction.norm());
  const Matrix exact = logits_after(model, cache, tail);
  EXPECT_GT((by_mask - exact).norm(), 1e-3 * exact.norm());  // pruning changed something
  std::vector<std::vector<std::int64_t>> all(kept.size());
  for (auto& row : all) {
    for (std::int64_t t = 0; t < 40; ++t) row.push_back(t);
  }
  EXPECT_EQ(logits_after(model, mask_pruned(cache, all, m.kv_heads), tail), exact);
  KvCache masked = mask_pruned(cache, kept, m.kv_heads);
  KvCache* one[] = {&masked};
  model.decode_step(std::vector<std::int32_t>{7}, one);
  ASSERT_EQ(masked.key_mask[0].rows(), 41);
  EXPECT_EQ(masked.key_mask[0].row(40).sum(), m.kv_heads);
  // Statistics would describe another cache: refused.
  EXPECT_THROW(model.forward(tail, masked, {.logits = LogitsMode::kNone, .stats = {.mass = true}}),
               std::invalid_argument);
}

/// Two query heads sharing one KV head, three tokens, all-zero queries: uniform
/// causal attention rows [1], [1/2, 1/2], [1/3, 1/3, 1/3].
AttentionStats uniform_stats(int window) {
  const Matrix q = Matrix::Zero(3, 2 * 4), k = random_scores(3, 4, 9), v = random_scores(3, 4, 8);
  AttentionStats st;
  st.mass = Matrix::Zero(2, 3);
  st.window_mass = Matrix::Zero(2, 3);
  st.max = Matrix::Zero(2, 3);
  st.window = window;
  cost_model::ModelSpec m;
  m.q_heads = 2;
  m.kv_heads = 1;
  m.head_dim = 4;
  Matrix out;
  causal_attention(q, k, v, m, out, &st, 0);
  return st;
}

cost_model::ModelSpec one_layer_gqa() {
  cost_model::ModelSpec m;
  m.layers = 1;
  m.q_heads = 2;
  m.kv_heads = 1;
  return m;
}

TEST(Baselines, H2OAccumulatesTheAttentionEachKeyReceived) {
  const Matrix h2o = h2o_scores(uniform_stats(32), one_layer_gqa());
  ASSERT_EQ(h2o.rows(), 1);
  EXPECT_NEAR(h2o(0, 0), 2 * (1 + 0.5 + 1.0 / 3), 1e-6);
  EXPECT_NEAR(h2o(0, 1), 2 * (0.5 + 1.0 / 3), 1e-6);
  EXPECT_NEAR(h2o(0, 2), 2 * (1.0 / 3), 1e-6);
}

TEST(Baselines, SnapKVPoolsTheLastWindowsVotes) {
  const AttentionStats st = uniform_stats(2);
  // Last two queries vote [1/2 + 1/3, 1/2 + 1/3, 1/3] per head; two heads summed.
  const double a = 2 * (0.5 + 1.0 / 3), b = 2 * (1.0 / 3);
  const Matrix snap = snapkv_scores(st, one_layer_gqa(), 3);
  EXPECT_NEAR(snap(0, 0), (a + a) / 3, 1e-6);
  EXPECT_NEAR(snap(0, 1), (a + a + b) / 3, 1e-6);
  EXPECT_NEAR(snap(0, 2), (a + b) / 3, 1e-6);
}

TEST(Baselines, AveragePoolIsZeroPaddedSamePadding) {
  const Matrix x = (Matrix(1, 4) << 3, 0, 0, 6).finished();
  EXPECT_EQ(avg_pool(x, 3), (Matrix(1, 4) << 1, 1, 2, 2).finished());
}

TEST(Baselines, MaxStatisticIsTheLargestWeightAnyQueryGave) {
  const AttentionStats st = uniform_stats(32);
  EXPECT_NEAR(st.max(0, 0), 1.0, 1e-6);
  EXPECT_NEAR(st.max(1, 1), 0.5, 1e-6);
  EXPECT_NEAR(st.max(0, 2), 1.0 / 3, 1e-6);
}

TEST(Baselines, KVZipScoresLeaveTheCacheUnchangedAndChunkingOnlyLowersThem) {
  const Model model(load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_qwen2"));
  std::vector<std::int32_t> ctx;
  for (int i = 0; i < 24; ++i) ctx.push_back((i * 37 + 5) % 96);
  const std::vector<std::int32_t> prompt{1, 2, 3};
  KvCache cache = model.new_cache();
  model.forward(ctx, cache, {.logits = LogitsMode::kNone});
  const KvCache before = cache;
  const Matrix one = kvzip_scores(model, ctx, cache, prompt, 1000);
  EXPECT_EQ(cache.k[1], before.k[1]);
  EXPECT_EQ(cache.tokens(), 24);
  const Matrix two = kvzip_scores(model, ctx, cache, prompt, 12);
  const auto& m = model.spec();
  ASSERT_EQ(one.rows(), m.layers * m.kv_heads);
  ASSERT_EQ(one.cols(), 24);
  EXPECT_GT(one.minCoeff(), 0.0f);
  EXPECT_LE(one.maxCoeff(), 1.0f + 1e-6f);
  // The first chunk's queries are a prefix of the single-chunk run's (causal), so the
  // single run's max over more queries can only be larger for the first chunk's keys.
  EXPECT_TRUE((one.leftCols(12).array() >= two.leftCols(12).array() - 1e-6f).all());
  EXPECT_GT((one - two).norm(), 0.0f);
}

/// Attention weights by hand: weights[layer][q_head] is [new queries][keys] (double), the
/// softmax of q·k/√d over the keys each query sees (causal), for a forward of the rows of
/// `r` (captured attention inputs) that followed `first_position` cached tokens, with the
/// cache's post-RoPE keys.
using Weights = std::vector<std::vector<std::vector<std::vector<double>>>>;
Weights hand_weights(const Model& model, const ForwardResult& r, const KvCache& cache,
                     std::int64_t first_position) {
  const auto& m = model.spec();
  const int d = m.head_dim, group = m.q_heads / m.kv_heads;
  Weights w(m.layers, std::vector<std::vector<std::vector<double>>>(m.q_heads));
  for (int l = 0; l < m.layers; ++l) {
    const LayerWeights& lw = model.weights().layers[l];
    Matrix q = r.attn_inputs[l] * lw.wq.transpose();
    if (lw.bq.size()) q.rowwise() += lw.bq;
    rope(q, m.q_heads, m, first_position);
    const Matrix& k = cache.k[l];
    for (int h = 0; h < m.q_heads; ++h) {
      const int g = h / group;
      for (Eigen::Index i = 0; i < q.rows(); ++i) {
        const std::int64_t seen = first_position + i + 1;
        std::vector<double> s(seen);
        double top = -1e300;
        for (std::int64_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += double(q(i, h * d + e)) * double(k(j, g * d + e));
          s[j] = dot / std::sqrt(double(d));
          top = std::max(top, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - top));
        for (double& x : s) x /= sum;
        s.resize(k.rows(), 0.0);
        w[l][h].push_back(std::move(s));
      }
    }
  }
  return w;
}

std::vector<std::int32_t> some_tokens(int n, int salt) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 11 + 5) % 96);
  return t;
}

const Model& tiny_llama() {
  static const Model model(
      load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama"));
  return model;
}

/// |a − b| <= 1e-5 + 1e-4·|b| everywhere, listing the first mismatches.
void expect_close(const Matrix& got, const std::vector<std::vector<double>>& want) {
  ASSERT_EQ(got.rows(), std::ssize(want));
  int shown = 0;
  double norm = 0;
  for (Eigen::Index r = 0; r < got.rows(); ++r) {
    ASSERT_EQ(got.cols(), std::ssize(want[r]));
    for (Eigen::Index c = 0; c < got.cols(); ++c) {
      norm += want[r][c] * want[r][c];
      if (std::abs(got(r, c) - want[r][c]) > 1e-5 + 1e-4 * std::abs(want[r][c]) && shown++ < 5) {
        ADD_FAILURE() << "row " << r << " key " << c << ": got " << got(r, c) << ", by hand "
                      << want[r][c];
      }
    }
  }
  EXPECT_GT(norm, 0.0);
}

TEST(BaselinesByHand, H2OIsTheSumOfEveryQuerysWeightOverTheGroup) {
  const Model& model = tiny_llama();
  const auto& m = model.spec();
  const auto tokens = some_tokens(14, 1);
  KvCache cache = model.new_cache();
  const ForwardResult r = model.forward(
      tokens, cache,
      {.logits = LogitsMode::kNone, .capture_attn_inputs = true, .stats = {.mass = true}});
  const Weights w = hand_weights(model, r, cache, 0);
  const int group = m.q_heads / m.kv_heads;
  std::vector<std::vector<double>> want(m.layers * m.kv_heads, std::vector<double>(14, 0.0));
  for (int l = 0; l < m.layers; ++l) {
    for (int h = 0; h < m.q_heads; ++h) {
      for (const auto& row : w[l][h]) {
        for (int j = 0; j < 14; ++j) want[l * m.kv_heads + h / group][j] += row[j];
      }
    }
  }
  expect_close(h2o_scores(r.stats, m), want);
}

TEST(BaselinesByHand, SnapKVPoolsTheLastWindowsVotesOverTheGroup) {
  const Model& model = tiny_llama();
  const auto& m = model.spec();
  const int n = 15, window = 4;
  const auto tokens = some_tokens(n, 2);
  KvCache cache = model.new_cache();
  const ForwardResult r = model.forward(tokens, cache,
                                        {.logits = LogitsMode::kNone,
                                         .capture_attn_inputs = true,
                                         .stats = {.window_mass = true, .window = window}});
  const Weights w = hand_weights(model, r, cache, 0);
  const int group = m.q_heads / m.kv_heads;
  std::vector<std::vector<double>> votes(m.layers * m.kv_heads, std::vector<double>(n, 0.0));
  for (int l = 0; l < m.layers; ++l) {
    for (int h = 0; h < m.q_heads; ++h) {
      for (int i = n - window; i < n; ++i) {
        for (int j = 0; j < n; ++j) votes[l * m.kv_heads + h / group][j] += w[l][h][i][j];
      }
    }
  }
  std::vector<std::vector<double>> want = votes;  // pooled, kernel 3, zero-padded ends
  for (std::size_t row = 0; row < votes.size(); ++row) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int o = -1; o <= 1; ++o) sum += j + o >= 0 && j + o < n ? votes[row][j + o] : 0.0;
      want[row][j] = sum / 3;
    }
  }
  expect_close(snapkv_scores(r.stats, m, 3), want);
}

TEST(BaselinesByHand, KVZipIsTheLargestWeightAnyRepeatQueryOfTheGroupPays) {
  const Model& model = tiny_llama();
  const auto& m = model.spec();
  const int n = 12;
  const auto ctx = some_tokens(n, 3);
  const std::vector<std::int32_t> prompt{7, 8, 9};
  KvCache cache = model.new_cache();
  model.forward(ctx, cache, {.logits = LogitsMode::kNone});
  // The second prefill by hand: prompt + context again on a copy of the context's cache.
  std::vector<std::int32_t> input = prompt;
  input.insert(input.end(), ctx.begin(), ctx.end());
  KvCache repeat = cache;
  const ForwardResult r =
      model.forward(input, repeat, {.logits = LogitsMode::kNone, .capture_attn_inputs = true});
  const Weights w = hand_weights(model, r, repeat, n);
  const int group = m.q_heads / m.kv_heads;
  std::vector<std::vector<double>> want(m.layers * m.kv_heads, std::vector<double>(n, 0.0));
  for (int l = 0; l < m.layers; ++l) {
    for (int h = 0; h < m.q_heads; ++h) {
      for (const auto& row : w[l][h]) {
        for (int j = 0; j < n; ++j) {
          double& best = want[l * m.kv_heads + h / group][j];
          best = std::max(best, row[j]);
        }
      }
    }
  }
  expect_close(kvzip_scores(model, ctx, cache, prompt, 4096), want);
}

}  // namespace
}  // namespace kvshift::backend
