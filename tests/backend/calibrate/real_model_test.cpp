// A reduced calibration on SmolLM2-135M (few requests, short history, two
// candidate groups) when `make model` has prepared models/smollm2-135m and
// data/corpus/kjv.tokens: real NLLs are sane, predictors fold exactly and the
// written topology is one the cost model reads.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/calibrate/calibration.hpp"
#include "backend/weights.hpp"

namespace kvshift::backend::calibrate {
namespace {

TEST(CalibrationRealModel, ReducedRunOnSmolLM2) {
  const std::string root = KVSHIFT_SOURCE_DIR;
  const std::string model_dir = root + "/models/smollm2-135m";
  const std::string tokens = root + "/data/corpus/kjv.tokens";
  if (!std::filesystem::exists(model_dir + "/model.safetensors") ||
      !std::filesystem::exists(tokens)) {
    GTEST_SKIP() << "run `make model` first";
  }
  const Model model(load_hf_model(model_dir));
  const std::vector<std::int32_t> corpus = read_tokens(tokens);
  check_vocabulary(corpus, model.spec().vocab, tokens, model_dir);
  CalibrationOptions o;
  o.history = 48;
  o.eval = 16;
  o.counts = {3, 2, 2, 0, 2};
  o.candidates = {7, 8};
  o.threads = 2;
  o.alphas = {1e-3, 1e-1};
  const CalibrationResult r = run_calibration(model, corpus, o);
  // Real text on the real model: a few nats per token, not ~log(49152) = 10.8.
  EXPECT_GT(r.exact_nll_select, 0.3);
  EXPECT_LT(r.exact_nll_select, 6.0);
  ASSERT_EQ(r.prefixes.size(), 2u);
  EXPECT_EQ(r.prefixes[1].groups.size(), 2u);
  // Omitting layers 12-15 together moves anchors outward: more than the two single fits.
  EXPECT_GE(r.fits, 3u);
  const TestQuality& q = r.chosen().test;
  EXPECT_TRUE(std::isfinite(q.ppl_exact));
  EXPECT_LT(q.ppl_exact, 400.0);
  EXPECT_TRUE(std::isfinite(q.delta_nll_mean));
  for (const FittedGroup& f : r.predictors) {
    EXPECT_LT(f.fold_max_rel_error, 1e-4);
    EXPECT_EQ(f.predictor.weight.rows(), 4 * model.spec().kv_width());
    EXPECT_EQ(f.predictor.weight.cols(), 2 * model.spec().kv_width());
  }
}

}  // namespace
}  // namespace kvshift::backend::calibrate
