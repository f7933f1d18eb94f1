// RISK-KV reconstruction op: the batched GEMM path against a direct per-row
// computation, ridge-free exact cases (a copy predictor must rebuild the
// anchors' KV bit-for-bit up to RoPE rounding) and the replaced-layer forward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/model.hpp"
#include "backend/reconstruct.hpp"
#include "tests/backend/tiny_spec.hpp"

namespace kvshift::backend {
namespace {

cost_model::ModelSpec small_spec() {
  return testing::tiny_spec(
      "recon-test", {.layers = 8, .hidden = 48, .head_dim = 12, .intermediate = 64, .vocab = 50});
}

KvCache random_cache(const cost_model::ModelSpec& m, std::int64_t T, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  KvCache c = KvCache::empty(m.layers, std::int64_t{m.kv_heads} * m.head_dim);
  for (int l = 0; l < m.layers; ++l) {
    c.k[l].resize(T, m.kv_heads * m.head_dim);
    c.v[l].resize(T, m.kv_heads * m.head_dim);
    for (Eigen::Index i = 0; i < c.k[l].size(); ++i) c.k[l].data()[i] = d(rng);
    for (Eigen::Index i = 0; i < c.v[l].size(); ++i) c.v[l].data()[i] = d(rng);
  }
  return c;
}

double rel(const Matrix& a, const Matrix& b) {
  EXPECT_GT(b.norm(), 0.0f);
  return (a - b).norm() / b.norm();
}

/// Z row t of one request computed element by element from the cache.
void direct_reconstruct(const GroupPredictor& p, KvCache& c, const cost_model::ModelSpec& m) {
  const Eigen::Index half = m.kv_heads * m.head_dim, w = 2 * half;
  const Eigen::Index T = c.k[p.anchor_layers[0]].rows();
  std::vector<Matrix> k(p.target_layers.size(), Matrix(T, half)), v = k;
  for (Eigen::Index t = 0; t < T; ++t) {
    RowVector x(w * p.anchor_layers.size());
    for (std::size_t a = 0; a < p.anchor_layers.size(); ++a) {
      Matrix key = c.k[p.anchor_layers[a]].row(t);
      rope(key, m.kv_heads, m, t, true);
      x.segment(a * w, half) = key.row(0);
      x.segment(a * w + half, half) = c.v[p.anchor_layers[a]].row(t);
    }
    for (std::size_t j = 0; j < p.target_layers.size(); ++j) {
      for (Eigen::Index col = 0; col < w; ++col) {
        double z = p.bias[j * w + col];
        for (Eigen::Index i = 0; i < x.size(); ++i) z += double(x[i]) * p.weight(i, j * w + col);
        (col < half ? k[j](t, col) : v[j](t, col - half)) = static_cast<float>(z);
      }
      Matrix row = k[j].row(t);
      rope(row, m.kv_heads, m, t);
      k[j].row(t) = row.row(0);
    }
  }
  for (std::size_t j = 0; j < p.target_layers.size(); ++j) {
    c.k[p.target_layers[j]] = k[j];
    c.v[p.target_layers[j]] = v[j];
  }
}

TEST(Reconstruct, BatchedGemmMatchesADirectPerRowComputation) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  const GroupPredictor p = random_predictor(m, topo.groups()[0], 3);
  ASSERT_EQ(p.anchor_layers, (std::vector<int>{0, 1, 4, 5}));
  KvCache a = random_cache(m, 13, 1), b = random_cache(m, 29, 2);
  KvCache a_ref = a, b_ref = b;
  KvCache* both[] = {&a, &b};
  reconstruct_group(p, both, m);
  direct_reconstruct(p, a_ref, m);
  direct_reconstruct(p, b_ref, m);
  for (int l : {2, 3}) {
    EXPECT_LT(rel(a.k[l], a_ref.k[l]), 1e-5);
    EXPECT_LT(rel(a.v[l], a_ref.v[l]), 1e-5);
    EXPECT_LT(rel(b.k[l], b_ref.k[l]), 1e-5);
    EXPECT_LT(rel(b.v[l], b_ref.v[l]), 1e-5);
  }
  EXPECT_EQ(a.k[6], a_ref.k[6]);  // layers outside the group are untouched
}

TEST(Reconstruct, SharingAPredictorGivesTheSameResultAsOneRequestAtATime) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2, 3});
  std::vector<GroupPredictor> preds;
  for (const auto& g : topo.groups()) preds.push_back(random_predictor(m, g, 10 + g.group));
  KvCache a = random_cache(m, 17, 4), b = random_cache(m, 9, 5);
  KvCache a1 = a, b1 = b;
  KvCache* both[] = {&a, &b};
  reconstruct(preds, both, m);
  KvCache* only_a[] = {&a1};
  KvCache* only_b[] = {&b1};
  reconstruct(preds, only_a, m);
  reconstruct(preds, only_b, m);
  for (int l = 0; l < m.layers; ++l) {
    EXPECT_LT((a.k[l] - a1.k[l]).cwiseAbs().maxCoeff(), 1e-5f) << l;
    EXPECT_LT((b.v[l] - b1.v[l]).cwiseAbs().maxCoeff(), 1e-5f) << l;
  }
}

TEST(Reconstruct, CopyPredictorRebuildsTheAnchorLayersExactly) {
  // Ridge-free: B copies anchor 0's [K_pre, V] into target 2 and anchor 1's into target 3.
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 1);
  const Eigen::Index w = m.kv_width();
  p.weight.setZero();
  p.bias.setZero();
  p.weight.block(0, 0, w, w).setIdentity();
  p.weight.block(w, w, w, w).setIdentity();
  KvCache c = random_cache(m, 21, 6);
  KvCache* one[] = {&c};
  reconstruct_group(p, one, m);
  EXPECT_LT(rel(c.k[2], c.k[0]), 1e-6);
  EXPECT_EQ(c.v[2], c.v[0]);
  EXPECT_LT(rel(c.k[3], c.k[1]), 1e-6);
  EXPECT_EQ(c.v[3], c.v[1]);
}

TEST(Reconstruct, BiasOnlyPredictorWritesTheBiasRotatedToEachPosition) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {3});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 2);
  p.weight.setZero();
  KvCache c = random_cache(m, 5, 7);
  KvCache* one[] = {&c};
  reconstruct_group(p, one, m);
  const Eigen::Index half = m.kv_width() / 2;
  for (Eigen::Index t = 0; t < 5; ++t) {
    Matrix k = c.k[4].row(t);
    rope(k, m.kv_heads, m, t, true);
    EXPECT_LT((k.row(0) - p.bias.head(half)).norm(), 1e-5f) << t;
    EXPECT_EQ(c.v[4].row(t), p.bias.segment(half, half)) << t;
  }
}

TEST(Reconstruct, OnGemmaTheRebuiltKeysAreNormedPerHeadThenRotatedWithTheTargetLayersBase) {
  // Anchors 0-1 are sliding layers (RoPE base 10,000), targets 2-3 global (base 1e6): a copy
  // predictor must undo the anchor's rotation, norm each head with the target's weights, and
  // rotate with the target's base.
  auto m = small_spec();
  m.gemma = true;
  m.rope_theta = 1e6;
  m.sliding_window = 4;
  m.sliding_layers = {true, true, false, false, true, true, false, false};
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 1);
  const Eigen::Index w = m.kv_width(), half = w / 2;
  p.weight.setZero();
  p.bias.setZero();
  p.weight.block(0, 0, w, w).setIdentity();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> scale(0.5f, 1.5f);
  for (Eigen::Index i = 0; i < p.key_norm.size(); ++i) p.key_norm.data()[i] = scale(rng);
  p.norm_eps = 1e-6f;
  KvCache c = random_cache(m, 11, 8);
  const Matrix anchor_pre = pre_rope_keys(c, 0, m);
  KvCache* one[] = {&c};
  reconstruct_group(p, one, m);

  Matrix want(anchor_pre.rows(), half);
  for (Eigen::Index t = 0; t < want.rows(); ++t) {
    for (int h = 0; h < m.kv_heads; ++h) {
      double ss = 0;
      for (int d = 0; d < m.head_dim; ++d) ss += std::pow(anchor_pre(t, h * m.head_dim + d), 2);
      const double inv = 1.0 / std::sqrt(ss / m.head_dim + p.norm_eps);
      for (int d = 0; d < m.head_dim; ++d) {
        want(t, h * m.head_dim + d) =
            static_cast<float>(anchor_pre(t, h * m.head_dim + d) * inv * p.key_norm(0, d));
      }
    }
  }
  rope(want, m.kv_heads, m, 0, false, 2);
  EXPECT_LT(rel(c.k[2], want), 1e-5);
  Matrix wrong_base = want;  // the same keys rotated back and forth with the sliding base
  rope(wrong_base, m.kv_heads, m, 0, true, 2);
  rope(wrong_base, m.kv_heads, m, 0, false, 0);
  EXPECT_GT(rel(wrong_base, want), 1e-2);
  EXPECT_EQ(c.v[2], c.v[0]);
}

TEST(Reconstruct, OnGemmaAPredictorWithoutKeyNormsIsRefused) {
  auto m = small_spec();
  m.gemma = true;
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 1);
  p.key_norm.resize(0, 0);
  KvCache c = random_cache(m, 3, 1);
  KvCache* one[] = {&c};
  EXPECT_THROW(reconstruct_group(p, one, m), std::invalid_argument);
}

TEST(Reconstruct, SinkRowsStayExactAndTheOtherRowsAreRebuiltAtTheirPositions) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 3);
  // Two requests of different lengths, one shorter than the sink rows: nothing of it is rebuilt.
  for (const std::int64_t T : {std::int64_t{13}, std::int64_t{2}}) {
    for (const int sink : {1, 3}) {
      SCOPED_TRACE("T " + std::to_string(T) + ", sink rows " + std::to_string(sink));
      KvCache exact = random_cache(m, T, 7), reference = exact;
      direct_reconstruct(p, reference, m);  // every row rebuilt
      p.sink_rows = sink;
      KvCache c = exact;
      KvCache* one[] = {&c};
      reconstruct_group(p, one, m);
      const Eigen::Index s = std::min<Eigen::Index>(sink, T);
      for (int l : {2, 3}) {
        ASSERT_EQ(c.k[l].rows(), T);
        EXPECT_EQ(Matrix(c.k[l].topRows(s)), Matrix(exact.k[l].topRows(s)));
        EXPECT_EQ(Matrix(c.v[l].topRows(s)), Matrix(exact.v[l].topRows(s)));
        if (s < T) {
          EXPECT_LT(rel(c.k[l].bottomRows(T - s), reference.k[l].bottomRows(T - s)), 1e-5);
          EXPECT_LT(rel(c.v[l].bottomRows(T - s), reference.v[l].bottomRows(T - s)), 1e-5);
        }
      }
      p.sink_rows = 0;
    }
  }
}

TEST(Reconstruct, SinkRowsThatWereNotSentAreAnError) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 3);
  p.sink_rows = 2;
  KvCache c = random_cache(m, 9, 1);
  c.k[2].resize(1, c.k[2].cols());  // one of the two sink rows arrived
  KvCache* one[] = {&c};
  try {
    reconstruct_group(p, one, m);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sink rows"), std::string::npos) << e.what();
  }
  p.sink_rows = -1;
  EXPECT_THROW(reconstruct_group(p, one, m), std::invalid_argument);
}

TEST(Reconstruct, RejectsAPredictorOfTheWrongShape) {
  const auto m = small_spec();
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2});
  GroupPredictor p = random_predictor(m, topo.groups()[0], 1);
  p.weight.conservativeResize(p.weight.rows() - 1, Eigen::NoChange);
  KvCache c = random_cache(m, 3, 1);
  KvCache* one[] = {&c};
  EXPECT_THROW(reconstruct_group(p, one, m), std::invalid_argument);
}

TEST(ReplacedLayers, ForwardOnAHistoryWithReplacedLayersChangesNllOnlyWhenKvChanges) {
  const Model model(load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama"));
  const std::vector<std::int32_t> seq{5, 17, 42, 8, 77, 3, 61, 29, 11, 90, 2, 36};
  const std::span<const std::int32_t> all(seq);
  KvCache exact_hist = model.new_cache();
  model.forward(all.first(7), exact_hist, {.logits = LogitsMode::kNone});
  KvCache h1 = exact_hist;
  const auto exact = model.teacher_forced_nll(all.subspan(7), h1);
  ASSERT_EQ(exact.size(), 4u);
  // Replacing layer 1 with its own KV is a no-op ...
  KvCache same = exact_hist;
  same.k[1] = Matrix(exact_hist.k[1]);
  const auto same_nll = model.teacher_forced_nll(all.subspan(7), same);
  for (std::size_t i = 0; i < exact.size(); ++i) EXPECT_DOUBLE_EQ(same_nll[i], exact[i]);
  // ... while replacing it with another layer's KV changes the continuation's NLL.
  KvCache swapped = exact_hist;
  swapped.k[1] = exact_hist.k[0];
  swapped.v[1] = exact_hist.v[0];
  const auto swapped_nll = model.teacher_forced_nll(all.subspan(7), swapped);
  double diff = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) diff += std::abs(swapped_nll[i] - exact[i]);
  EXPECT_GT(diff, 1e-3);
}

}  // namespace
}  // namespace kvshift::backend
