// make_cuda_profiler(): without CUDA compiled it throws NotCompiled with a
// clear message; compiled but without a device it throws naming the reason;
// with a device it times every asked op of a small model (seeded, or with
// real weights and predictors handed over in ProfileRequest::inputs) and
// returns sane rows, proxy_score with a trained mapper's weights included.
// GpuModel's decode step is checked against a prefill of
// one more token: the same logits for every request of the batch; its prefill
// against the CPU model's, within bf16 (in a full build; the GPU-only build of
// bench/gpu_check.sh has no CPU model).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>

#include "backend/profiler.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/omission_plan.hpp"

#ifdef KVSHIFT_TEST_HAVE_CUDA
#include "backend/cuda/gpu_model.hpp"
#ifdef KVSHIFT_TEST_HAVE_BACKEND
#include "backend/model.hpp"
#endif
#include "backend/reconstruct.hpp"
#include "backend/weights.hpp"
#include "gpu_support.hpp"
#include "random_mapper.hpp"
#endif

namespace kvshift::backend {
namespace {

#ifndef KVSHIFT_TEST_HAVE_CUDA

TEST(CudaProfiler, SaysItWasNotCompiled) {
  try {
    make_cuda_profiler();
    FAIL() << "expected NotCompiled";
  } catch (const NotCompiled& e) {
    EXPECT_NE(std::string(e.what()).find("the CUDA backend was not compiled"), std::string::npos)
        << e.what();
  }
}

#else

/// A small Qwen2-like shape (q/k/v biases, untied head) whose sizes are no tile's multiple.
cost_model::ModelSpec tiny_spec() {
  cost_model::ModelSpec s;
  s.name = "tiny";
  s.layers = 8;
  s.hidden = 256;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.intermediate = 344;
  s.vocab = 333;
  s.attention_bias = true;
  return s;
}

/// Uniform(-bound, bound) entries: the test builds ModelWeights without the CPU backend.
template <typename M>
void fill(M& m, Eigen::Index rows, Eigen::Index cols, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-bound, bound);
  m.resize(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = u(rng);
}

std::shared_ptr<const ModelWeights> tiny_weights(const cost_model::ModelSpec& s) {
  std::mt19937_64 rng(7);
  auto w = std::make_shared<ModelWeights>();
  w->spec = s;
  const int d = s.hidden, qd = s.q_heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  const float in_d = 1.0f / std::sqrt(static_cast<float>(d));
  fill(w->embed, s.vocab, d, 1.0f, rng);
  fill(w->lm_head, s.vocab, d, in_d, rng);
  fill(w->final_norm, d, 1, 1.0f, rng);
  w->final_norm.array() += 1.0f;
  for (int l = 0; l < s.layers; ++l) {
    LayerWeights lw;
    fill(lw.attn_norm, d, 1, 0.2f, rng);
    fill(lw.mlp_norm, d, 1, 0.2f, rng);
    lw.attn_norm.array() += 1.0f;
    lw.mlp_norm.array() += 1.0f;
    fill(lw.wq, qd, d, in_d, rng);
    fill(lw.wk, kvd, d, in_d, rng);
    fill(lw.wv, kvd, d, in_d, rng);
    fill(lw.bq, 1, qd, 0.1f, rng);
    fill(lw.bk, 1, kvd, 0.1f, rng);
    fill(lw.bv, 1, kvd, 0.1f, rng);
    fill(lw.wo, d, qd, 1.0f / std::sqrt(static_cast<float>(qd)), rng);
    fill(lw.w_gate, s.intermediate, d, in_d, rng);
    fill(lw.w_up, s.intermediate, d, in_d, rng);
    fill(lw.w_down, d, s.intermediate, 1.0f / std::sqrt(static_cast<float>(s.intermediate)), rng);
    w->layers.push_back(std::move(lw));
  }
  return w;
}

std::shared_ptr<const std::vector<GroupPredictor> > tiny_predictors(
    const cost_model::ModelSpec& s, const cost_model::OmissionPlan& topo) {
  std::mt19937_64 rng(11);
  auto all = std::make_shared<std::vector<GroupPredictor> >();
  for (const auto& g : topo.groups()) {
    GroupPredictor p{g.anchor_layers, g.target_layers, {}, {}};
    const auto a = static_cast<Eigen::Index>(g.anchor_layers.size()) * s.kv_width();
    const auto t = static_cast<Eigen::Index>(g.target_layers.size()) * s.kv_width();
    fill(p.weight, a, t, 0.02f, rng);
    fill(p.bias, 1, t, 0.1f, rng);
    all->push_back(std::move(p));
  }
  return all;
}

void expect_sane(const std::vector<OpTiming>& rows, int repeats) {
  for (const OpTiming& r : rows) {
    EXPECT_GT(r.median_s, 0) << r.op;
    EXPECT_LE(r.p10_s, r.median_s) << r.op;
    EXPECT_LE(r.median_s, r.p90_s) << r.op;
    EXPECT_EQ(r.repeats, repeats) << r.op;
  }
}

TEST(CudaProfiler, WithoutADeviceSaysWhy) {
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_cuda_profiler();
    FAIL() << "expected an error without a device";
  } catch (const NotCompiled&) {
    FAIL() << "CUDA is compiled into this build";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA backend: "), std::string::npos) << e.what();
  }
}

TEST(CudaProfiler, TimesEveryOpOfASmallModel) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = cost_model::find_model("smollm2-135m");
  req.proxy = cost_model::find_model("smollm2-135m");
  req.omission = cost_model::OmissionPlan::from_groups(req.model.layers, {2, 3, 7});
  req.tokens = {100, 300};
  req.sharing = {1, 3};
  req.decode_batches = {1, 5};
  req.decode_contexts = {70};
  req.repeats = 3;
  auto profiler = make_cuda_profiler();
  EXPECT_EQ(profiler->backend_name(), "cuda");
  EXPECT_FALSE(profiler->device_description().empty());
  const auto rows = profiler->run(req);
  expect_sane(rows, 3);
  std::set<std::string> ops;
  for (const OpTiming& r : rows) {
    ops.insert(r.op);
    if (r.op == "decode") {
      EXPECT_EQ(r.tokens, 70);
      EXPECT_TRUE(r.batch == 1 || r.batch == 5) << r.batch;
    } else {
      EXPECT_EQ(r.batch, 1) << r.op;
    }
  }
  // No predictor_load: the predictors are seeded, not real ones to load.
  EXPECT_EQ(ops,
            (std::set<std::string>{"prefill", "reconstruct", "proxy_score", "prune", "decode"}));
  EXPECT_EQ(rows.size(), 2u * (1 + 2 + 1 + 1) + 2u);
}

TEST(CudaProfiler, RunsOnlyTheAskedOps) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = cost_model::find_model("smollm2-135m");
  req.omission = cost_model::OmissionPlan::from_groups(req.model.layers, {2});
  req.tokens = {64};
  req.decode_batches = {2};
  req.decode_contexts = {33, 65};
  req.ops = {"decode", "prune"};
  req.repeats = 2;
  const auto rows = make_cuda_profiler()->run(req);
  expect_sane(rows, 2);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].op, "prune");
  EXPECT_EQ(rows[1].op, "decode");
  EXPECT_EQ(rows[2].op, "decode");
  EXPECT_EQ(rows[2].tokens, 65);
  EXPECT_EQ(rows[2].batch, 2);
}

TEST(CudaProfiler, ProxyScoreRunsTheMapperItIsGiven) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = tiny_spec();
  req.proxy = tiny_spec();
  req.tokens = {45, 130};
  req.ops = {"proxy_score"};
  req.repeats = 2;
  std::mt19937_64 rng(13);
  MapperConfig c{.in_channels = 8 * 4, .targets = 8 * 2, .width = 32, .heads = 4, .window = 16};
  req.inputs.mapper_weights =
      std::make_shared<const MapperWeights>(testing::random_mapper_weights(c, rng));
  const auto rows = make_cuda_profiler()->run(req);
  expect_sane(rows, 2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op, "proxy_score");
  EXPECT_EQ(rows[1].tokens, 130);

  c.targets = 8 * 2 + 1;  // not this target's layers·KV heads
  req.inputs.mapper_weights =
      std::make_shared<const MapperWeights>(testing::random_mapper_weights(c, rng));
  EXPECT_THROW(make_cuda_profiler()->run(req), InputError);
}

TEST(CudaProfiler, UsesRealWeightsAndLoadsRealPredictors) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = tiny_spec();
  req.proxy = tiny_spec();
  req.omission = cost_model::OmissionPlan::from_groups(req.model.layers, {2});
  req.inputs.target = tiny_weights(req.model);
  req.inputs.proxy = req.inputs.target;
  req.inputs.predictors = tiny_predictors(req.model, req.omission);
  req.predictor_dtype = cost_model::DType::kBF16;
  req.tokens = {45};
  req.sharing = {2};
  req.decode_batches = {3};
  req.decode_contexts = {29};
  req.repeats = 2;
  const auto rows = make_cuda_profiler()->run(req);
  expect_sane(rows, 2);
  std::set<std::string> ops;
  for (const OpTiming& r : rows) ops.insert(r.op);
  EXPECT_EQ(ops, (std::set<std::string>{"prefill", "reconstruct", "proxy_score", "prune", "decode",
                                        "predictor_load"}));
  EXPECT_EQ(rows.back().op, "predictor_load");
  EXPECT_EQ(rows.back().tokens, 1);
}

TEST(CudaProfiler, PredictorsOfAnotherTopologyAreAnInputError) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = tiny_spec();
  req.omission = cost_model::OmissionPlan::from_groups(req.model.layers, {2});
  req.inputs.predictors =
      tiny_predictors(req.model, cost_model::OmissionPlan::from_groups(req.model.layers, {3}));
  req.tokens = {16};
  req.ops = {"reconstruct"};
  EXPECT_THROW(make_cuda_profiler()->run(req), InputError);
}

TEST(GpuModel, DecodeStepContinuesAPrefill) {
  KVSHIFT_REQUIRE_GPU();
  const cost_model::ModelSpec spec = tiny_spec();
  const auto weights = tiny_weights(spec);
  constexpr std::int64_t kContext = 37, kBatch = 3;
  kernels::cuda::Stream stream;
  const kernels::cuda::Context ctx(stream.get());
  gpu::GpuModel model(*weights, {kContext + 1, kBatch}, ctx);
  std::vector<std::int32_t> prompt(kContext + 1);
  for (std::size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<std::int32_t>(i * 7 % 333);
  model.set_token_ids(prompt);
  model.prefill(kContext + 1, false);
  const std::vector<float> want = model.copy_logits(1);

  // Every request holds the prompt's first kContext tokens and feeds its last one.
  gpu::DecodeCache cache(spec, kBatch, kContext, 3, ctx.stream());
  cache.copy_prompt(model.cache(kContext + 1), ctx.stream());
  model.set_token_ids(std::vector<std::int32_t>(kBatch, prompt.back()));
  model.decode_step(cache);
  const std::vector<float> got = model.copy_logits(kBatch);
  for (std::int64_t b = 0; b < kBatch; ++b) {
    const std::vector<float> row(got.begin() + b * spec.vocab, got.begin() + (b + 1) * spec.vocab);
    std::string report;
    ASSERT_GT(kernels::testing::norm_of(want), 0.0);
    const double err = kernels::testing::relative_error(row, want, &report);
    EXPECT_LE(err, 2e-2) << "request " << b << ": relative error " << err << "\n" << report;
  }
}

#ifdef KVSHIFT_TEST_HAVE_BACKEND
TEST(GpuModel, PrefillMatchesTheCpuModelWithinBf16) {
  // Both run the one decoder program (backend/decoder_program.hpp): on the CUDA kernels with
  // fused bf16 weights here, on the CPU twins in fp32 there.
  KVSHIFT_REQUIRE_GPU();
  const cost_model::ModelSpec spec = tiny_spec();
  const auto weights = tiny_weights(spec);
  constexpr std::int64_t kTokens = 29;
  kernels::cuda::Stream stream;
  const kernels::cuda::Context ctx(stream.get());
  gpu::GpuModel model(*weights, {kTokens, 0}, ctx);
  std::vector<std::int32_t> prompt(kTokens);
  for (std::size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<std::int32_t>(i * 11 % 333);
  model.set_token_ids(prompt);
  model.prefill(kTokens, false);
  const std::vector<float> got = model.copy_logits(1);

  const Model cpu(*weights);
  KvCache cache = cpu.new_cache();
  ForwardOptions last;
  last.logits = LogitsMode::kLast;
  const Matrix want = cpu.forward(prompt, cache, last).logits;
  const std::vector<float> expected(want.data(), want.data() + want.size());
  std::string report;
  const double err = kernels::testing::relative_error(got, expected, &report);
  EXPECT_LE(err, 3e-2) << "relative error " << err << "\n" << report;
}
#endif  // KVSHIFT_TEST_HAVE_BACKEND

#endif

}  // namespace
}  // namespace kvshift::backend
