// ProxyKV selection and the baseline scores on hand-checkable cases.
#include <gtest/gtest.h>

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

/// Two query heads sharing one KV head, three tokens, all-zero queries: uniform
/// causal attention rows [1], [1/2, 1/2], [1/3, 1/3, 1/3].
AttentionStats uniform_stats(int window) {
  const Matrix q = Matrix::Zero(3, 2 * 4), k = random_scores(3, 4, 9), v = random_scores(3, 4, 8);
  AttentionStats st;
  st.mass = Matrix::Zero(2, 3);
  st.window_mass = Matrix::Zero(2, 3);
  st.max = Matrix::Zero(2, 3);
  st.window = window;
  Matrix out;
  causal_attention(q, k, v, {2, 1, 4, 0}, out, &st, 0);
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
  EXPECT_EQ(average_pool_rows(x, 3), (Matrix(1, 4) << 1, 1, 2, 2).finished());
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

}  // namespace
}  // namespace kvshift::backend
