// The CPU forward pass against logits and NLL computed independently in float64
// numpy (tools/tiny_llama/make_fixture.py) from the committed fixture weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/model.hpp"
#include "backend/pruning.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

struct Reference {
  std::vector<std::int32_t> tokens;
  Matrix logits;
  std::vector<double> nll;
};

std::string fixture(const std::string& name) {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/" + name;
}

Reference load_reference(const std::string& name) {
  std::ifstream in(fixture(name) + "/reference.json");
  const auto j = nlohmann::json::parse(in);
  Reference r;
  r.tokens = j["tokens"].get<std::vector<std::int32_t>>();
  const auto rows = j["logits"].get<std::vector<std::vector<float>>>();
  r.logits.resize(static_cast<Eigen::Index>(rows.size()),
                  static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t c = 0; c < rows[i].size(); ++c) r.logits(i, c) = rows[i][c];
  }
  r.nll = j["nll"].get<std::vector<double>>();
  return r;
}

double relative_error(const Matrix& a, const Matrix& b) {
  EXPECT_GT(b.norm(), 0.0f);
  return (a - b).norm() / b.norm();
}

class FixtureForward : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureForward, LogitsMatchTheNumpyReference) {
  const Reference ref = load_reference(GetParam());
  const Model model(load_hf_model(fixture(GetParam())));
  KvCache cache = model.new_cache();
  const ForwardResult r = model.forward(ref.tokens, cache);
  ASSERT_EQ(r.logits.rows(), ref.logits.rows());
  ASSERT_EQ(r.logits.cols(), ref.logits.cols());
  EXPECT_LT(relative_error(r.logits, ref.logits), 2e-6);
  EXPECT_LT((r.logits - ref.logits).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_EQ(cache.tokens(), static_cast<std::int64_t>(ref.tokens.size()));
}

TEST_P(FixtureForward, TeacherForcedNllMatchesTheReference) {
  const Reference ref = load_reference(GetParam());
  const Model model(load_hf_model(fixture(GetParam())));
  KvCache cache = model.new_cache();
  const std::vector<double> nll = model.teacher_forced_nll(ref.tokens, cache);
  ASSERT_EQ(nll.size(), ref.nll.size());
  for (std::size_t i = 0; i < nll.size(); ++i) EXPECT_NEAR(nll[i], ref.nll[i], 1e-5) << i;
}

TEST_P(FixtureForward, IncrementalForwardEqualsOnePrefill) {
  const Reference ref = load_reference(GetParam());
  const Model model(load_hf_model(fixture(GetParam())));
  KvCache cache = model.new_cache();
  const std::span<const std::int32_t> all(ref.tokens);
  model.forward(all.first(4), cache, {.logits = LogitsMode::kNone});
  const ForwardResult tail = model.forward(all.subspan(4), cache);
  EXPECT_LT(relative_error(tail.logits, ref.logits.bottomRows(ref.logits.rows() - 4)), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, FixtureForward,
                         ::testing::Values("tiny_llama", "tiny_qwen2", "tiny_gemma3"));

// The real models `make model` (SmolLM2-135M) and `make model-gemma3` (Gemma 3 270M) prepare,
// against the numpy reference's per-token NLLs on 2 × 256 corpus tokens that the preparation
// keeps in reference_nll.json (float32 on both sides; Gemma's windows open with its BOS).
class RealModelForward : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelForward, PerTokenNllMatchesTheNumpyReference) {
  const std::string dir = std::string(KVSHIFT_SOURCE_DIR) + "/models/" + GetParam();
  std::ifstream in(dir + "/reference_nll.json");
  if (!in || !std::filesystem::exists(dir + "/model.safetensors")) {
    GTEST_SKIP() << dir << " is not prepared (make model / make model-gemma3)";
  }
  const auto ref = nlohmann::json::parse(in);
  const Model model(load_hf_model(dir));
  for (std::size_t w = 0; w < ref["tokens"].size(); ++w) {
    const auto tokens = ref["tokens"][w].get<std::vector<std::int32_t>>();
    const auto want = ref["token_nll"][w].get<std::vector<double>>();
    KvCache cache = model.new_cache();
    const ForwardResult r = model.forward(tokens, cache);
    const std::vector<double> got =
        next_token_nll(r.logits.topRows(r.logits.rows() - 1), std::span(tokens).subspan(1));
    ASSERT_EQ(got.size(), want.size());
    double worst = 0, sum_got = 0, sum_want = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - want[i]));
      sum_got += got[i];
      sum_want += want[i];
    }
    EXPECT_LT(worst, 2e-4) << "window " << w;
    EXPECT_NEAR(sum_got / got.size(), sum_want / want.size(), 1e-5) << "window " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(PreparedModels, RealModelForward,
                         ::testing::Values("smollm2-135m", "gemma3-270m"));

TEST(Forward, LastLogitsModeReturnsOnlyTheFinalRow) {
  const Reference ref = load_reference("tiny_llama");
  const Model model(load_hf_model(fixture("tiny_llama")));
  KvCache cache = model.new_cache();
  const ForwardResult r = model.forward(ref.tokens, cache, {.logits = LogitsMode::kLast});
  ASSERT_EQ(r.logits.rows(), 1);
  EXPECT_LT(relative_error(r.logits, ref.logits.bottomRows(1)), 2e-6);
}

TEST(Forward, CapturesAttentionInputsAndPreRopeKeysPerLayer) {
  const Reference ref = load_reference("tiny_qwen2");
  const Model model(load_hf_model(fixture("tiny_qwen2")));
  KvCache cache = model.new_cache();
  const ForwardResult r = model.forward(
      ref.tokens, cache, {.capture_attn_inputs = true, .capture_pre_rope_keys = true});
  const auto& m = model.spec();
  ASSERT_EQ(r.attn_inputs.size(), static_cast<std::size_t>(m.layers));
  for (int l = 0; l < m.layers; ++l) {
    EXPECT_EQ(r.attn_inputs[l].rows(), static_cast<Eigen::Index>(ref.tokens.size()));
    EXPECT_EQ(r.attn_inputs[l].cols(), m.hidden);
    // The pre-RoPE keys are the normalised input through k_proj (+ bias) ...
    const LayerWeights& w = model.weights().layers[l];
    Matrix k = r.attn_inputs[l] * w.wk.transpose();
    k.rowwise() += w.bk;
    EXPECT_LT(relative_error(r.pre_rope_keys[l], k), 1e-6);
    // ... and the cache holds them rotated: undoing RoPE gives them back.
    EXPECT_LT(relative_error(pre_rope_keys(cache, l, m), r.pre_rope_keys[l]), 1e-6);
  }
}

TEST(Forward, RunLayersResumesMidModelExactly) {
  const Reference ref = load_reference("tiny_qwen2");
  const Model model(load_hf_model(fixture("tiny_qwen2")));
  const auto& m = model.spec();
  const auto n = static_cast<Eigen::Index>(ref.tokens.size());
  // A history of the first half, then the second half's residual run layer range by range.
  const std::span<const std::int32_t> tokens(ref.tokens);
  KvCache full = model.new_cache();
  const ForwardResult whole = model.forward(tokens, full);
  KvCache cache = model.new_cache();
  model.forward(tokens.first(n / 2), cache, {.logits = LogitsMode::kNone});
  Matrix x(n - n / 2, m.hidden);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    x.row(i) = model.weights().embed.row(tokens[n / 2 + i]);
  const int split = m.layers / 2;
  model.run_layers(0, split, x, cache);
  EXPECT_EQ(cache.k[split - 1].rows(), n);
  EXPECT_EQ(cache.k[split].rows(), n / 2);  // layers past the range untouched
  Matrix copy = x;
  EXPECT_THROW(model.run_layers(split - 1, split + 1, copy, cache), std::invalid_argument);
  model.run_layers(split, m.layers, x, cache);
  for (int l = 0; l < m.layers; ++l) {
    EXPECT_LT(relative_error(cache.k[l], full.k[l]), 1e-6) << l;
    EXPECT_LT(relative_error(cache.v[l], full.v[l]), 1e-6) << l;
  }
  const Matrix logits =
      rms_norm(x, model.weights().final_norm, m.rms_eps) * model.weights().output().transpose();
  EXPECT_LT(relative_error(logits, whole.logits.bottomRows(x.rows())), 2e-6);
  EXPECT_THROW(model.run_layers(1, 0, x, cache), std::invalid_argument);
  EXPECT_THROW(model.run_layers(0, m.layers + 1, x, cache), std::invalid_argument);
}

TEST(Forward, ABatchedDecodeStepEqualsOneForwardPerRequest) {
  // Qwen2 (q/k/v biases); three requests holding different histories, one pruned.
  const Reference ref = load_reference("tiny_qwen2");
  const Model model(load_hf_model(fixture("tiny_qwen2")));
  const std::span<const std::int32_t> tokens(ref.tokens);
  std::vector<KvCache> batched(3, model.new_cache()), single;
  const std::size_t lengths[] = {3, tokens.size() - 2, 7};
  for (std::size_t b = 0; b < 3; ++b) {
    model.forward(tokens.first(lengths[b]), batched[b], {.logits = LogitsMode::kNone});
  }
  batched[2].evicted = 5;  // as if pruned: its next token sits at position 12, not 7
  single = batched;
  const std::vector<std::int32_t> next{tokens[3], tokens[1], tokens[7]};
  std::vector<KvCache*> ptrs{&batched[0], &batched[1], &batched[2]};
  const Matrix logits = model.decode_step(next, ptrs);
  ASSERT_EQ(logits.rows(), 3);
  for (std::size_t b = 0; b < 3; ++b) {
    const ForwardResult one =
        model.forward(std::span(&next[b], 1), single[b], {.logits = LogitsMode::kLast});
    EXPECT_LT(relative_error(logits.row(static_cast<Eigen::Index>(b)), one.logits), 2e-6) << b;
    for (int l = 0; l < model.spec().layers; ++l) {
      ASSERT_EQ(batched[b].k[l].rows(), static_cast<Eigen::Index>(lengths[b] + 1));
      EXPECT_LT(relative_error(batched[b].k[l], single[b].k[l]), 1e-6) << b << " " << l;
      EXPECT_LT(relative_error(batched[b].v[l], single[b].v[l]), 1e-6) << b << " " << l;
    }
  }
  EXPECT_THROW(model.decode_step(std::vector<std::int32_t>{1}, ptrs), std::invalid_argument);
}

TEST(Forward, APrunedCacheKeepsTheTruePositionsOfNewTokens) {
  const Reference ref = load_reference("tiny_llama");
  const Model model(load_hf_model(fixture("tiny_llama")));
  const auto& m = model.spec();
  const std::span<const std::int32_t> tokens(ref.tokens);
  const std::int64_t h = static_cast<std::int64_t>(tokens.size()) - 1;
  KvCache full = model.new_cache();
  model.forward(tokens.first(h), full, {.logits = LogitsMode::kNone});
  // Every head keeps all tokens but 1..3.
  std::vector<std::int64_t> keep{0};
  for (std::int64_t t = 4; t < h; ++t) keep.push_back(t);
  const std::vector<std::vector<std::int64_t>> kept(m.layers * m.kv_heads, keep);
  KvCache pruned = compact(full, kept, m.kv_heads, m.head_dim);
  EXPECT_EQ(pruned.evicted, 3);
  EXPECT_EQ(pruned.next_position(), h);
  KvCache forgetful = pruned;
  forgetful.evicted = 0;
  const auto last = tokens.subspan(h);
  model.forward(last, full, {.logits = LogitsMode::kNone});
  model.forward(last, pruned, {.logits = LogitsMode::kNone});
  model.forward(last, forgetful, {.logits = LogitsMode::kNone});
  // Layer 0's new key depends only on the token and its position: equal iff positions are.
  EXPECT_EQ(pruned.k[0].bottomRows(1), full.k[0].bottomRows(1));
  EXPECT_GT((forgetful.k[0].bottomRows(1) - full.k[0].bottomRows(1)).norm(), 1e-3);
  // Keeping everything changes nothing.
  std::vector<std::int64_t> all(h);
  for (std::int64_t t = 0; t < h; ++t) all[t] = t;
  KvCache again = model.new_cache();
  model.forward(tokens.first(h), again, {.logits = LogitsMode::kNone});
  KvCache same = compact(again, {static_cast<std::size_t>(m.layers * m.kv_heads), all}, m.kv_heads,
                         m.head_dim);
  EXPECT_EQ(same.evicted, 0);
  const ForwardResult a = model.forward(last, again), b = model.forward(last, same);
  EXPECT_EQ(a.logits, b.logits);
}

TEST(Forward, RejectsTokenIdsOutsideTheVocabulary) {
  const Model model(load_hf_model(fixture("tiny_llama")));
  KvCache cache = model.new_cache();
  const std::vector<std::int32_t> bad{1, 2, 96};
  try {
    model.forward(bad, cache);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tokens[2]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvshift::backend
