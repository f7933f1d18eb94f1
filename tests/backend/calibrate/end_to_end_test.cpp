// The whole procedure on a tiny seeded model: every stage runs, the result is
// self-consistent (singles, order, prefixes, gate choices), the topology.json
// is readable by the scenarios reader, and predictors.safetensors reads back.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/calibrate/calibration.hpp"
#include "backend/calibrate/predictor_file.hpp"
#include "backend/calibrate/report.hpp"
#include "backend/safetensors.hpp"
#include "cost_model/input_error.hpp"
#include "scenarios/spec_files.hpp"
#include "tests/backend/tiny_spec.hpp"

namespace kvshift::backend::calibrate {
namespace {

cost_model::ModelSpec spec() { return testing::tiny_spec("tiny10", {.layers = 10}); }

std::vector<std::int32_t> corpus(std::size_t n) {
  // A repetitive stream so the model's keys carry structure the ridge can use.
  std::mt19937_64 rng(5);
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::int32_t>((i * 7 + rng() % 3) % 64);
  return t;
}

CalibrationOptions options(double eps) {
  CalibrationOptions o;
  o.history = 24;
  o.eval = 12;
  o.counts = {4, 3, 3, 2};
  o.eps = eps;
  o.threads = 2;
  return o;
}

TEST(CalibrationEndToEnd, TinyModelRunsEveryStageConsistently) {
  const Model model(random_weights(spec(), 21));
  const auto text = corpus(2000);
  const CalibrationResult r = run_calibration(model, text, options(0.002));
  // Interior groups of a 10-layer model: G2, G3, G4.
  ASSERT_EQ(r.singles.size(), 3u);
  EXPECT_EQ(r.singles[0].group, 2);
  EXPECT_EQ(r.order.size(), 3u);
  ASSERT_EQ(r.prefixes.size(), 3u);
  // Prefix 1 is the single π1, measured once.
  const auto first = std::find_if(r.singles.begin(), r.singles.end(),
                                  [&](const SingleRisk& s) { return s.group == r.order[0]; });
  EXPECT_DOUBLE_EQ(r.prefixes[0].mean, first->risk);
  for (std::size_t k = 0; k < r.prefixes.size(); ++k) {
    EXPECT_EQ(r.prefixes[k].groups.size(), k + 1);
    EXPECT_TRUE(std::isfinite(r.prefixes[k].mean));
    EXPECT_TRUE(r.prefixes[k].confirm_upper90.has_value());
  }
  // Three gates (a confirmation set was given); each choice is what choose_prefix says.
  ASSERT_EQ(r.gates.size(), 3u);
  EXPECT_EQ(r.chosen().gate, Gate::kUpper90);
  for (const GateChoice& g : r.gates) {
    EXPECT_EQ(g.prefix, choose_prefix(r.prefixes, g.gate, 0.002));
    EXPECT_EQ(g.test.requests, 3);
    EXPECT_GT(g.test.ppl_exact, 1.0);
    EXPECT_LE(g.test.ci95_low, g.test.delta_nll_mean);
    EXPECT_GE(g.test.ci95_high, g.test.delta_nll_mean);
    if (!g.prefix) {
      EXPECT_EQ(g.test.delta_nll_mean, 0.0);
      EXPECT_EQ(g.test.ppl_reconstructed, g.test.ppl_exact);
    }
  }
  EXPECT_EQ(r.predictors.size(), r.chosen().test.groups.size());
  for (const FittedGroup& f : r.predictors) EXPECT_LT(f.fold_max_rel_error, 1e-4);
}

TEST(CalibrationEndToEnd, GenerousEpsOmitsEveryCandidateAndFilesReadBack) {
  const Model model(random_weights(spec(), 22));
  const auto text = corpus(2000);
  const CalibrationResult r = run_calibration(model, text, options(1e9));
  ASSERT_TRUE(r.chosen().prefix.has_value());
  EXPECT_EQ(r.chosen().test.groups, (std::vector<int>{2, 3, 4}));
  EXPECT_DOUBLE_EQ(r.chosen().test.omitted_fraction, 0.6);
  EXPECT_EQ(r.chosen().test.violation_rate, 0.0);
  ASSERT_EQ(r.predictors.size(), 3u);
  // G2-G4 omitted together: each reads G1 (layers 0,1) and G5 (layers 8,9).
  for (const FittedGroup& f : r.predictors) {
    EXPECT_EQ(f.predictor.anchor_layers, (std::vector<int>{0, 1, 8, 9}));
  }
  const RunInfo info{"tiny", "corpus", 2000, cost_model::DType::kF16, 1.0, 1.0};
  // topology.json -> the scenarios reader gives the same topology.
  const scenarios::Json topo = topology_json(r, model.spec(), info);
  scenarios::Diagnostics diag;
  const cost_model::Topology t =
      scenarios::parse_topology(scenarios::Reader(topo, "", diag), model.spec());
  EXPECT_TRUE(diag.empty());
  ASSERT_EQ(t.groups().size(), 3u);
  EXPECT_EQ(t.groups()[1].anchor_layers, (std::vector<int>{0, 1, 8, 9}));
  // predictors.safetensors in fp16 reads back through the backend's reader.
  const std::string bytes = predictors_safetensors(r.predictors, cost_model::DType::kF16, "tiny10");
  const auto file = SafetensorsFile::from_bytes(
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), "predictors");
  const GroupPredictor& p = r.predictors[1].predictor;
  const Matrix w = file.read("G3.weight", {p.weight.rows(), p.weight.cols()});
  const double scale = p.weight.cwiseAbs().maxCoeff();
  EXPECT_LT((w - p.weight).cwiseAbs().maxCoeff(), 1e-3 * scale + 1e-6);
  EXPECT_EQ(file.read_vector("G3.bias", p.bias.size()).size(), p.bias.size());
  EXPECT_NE(report_markdown(r, model.spec(), info).find("Table II"), std::string::npos);
  EXPECT_EQ(report_json(r, model.spec(), info)["test"]["requests"], 3);
}

TEST(CalibrationEndToEnd, BadInputsAreInputErrors) {
  const Model model(random_weights(spec(), 23));
  const auto text = corpus(300);
  EXPECT_THROW(run_calibration(model, text, options(0.002)), InputError);  // 12 × 36 > 300
  auto o = options(0.002);
  o.counts.confirm = 0;
  o.gate = Gate::kStableSplit;
  EXPECT_THROW(run_calibration(model, corpus(2000), o), InputError);
  o = options(0.002);
  o.resamples = 100;
  EXPECT_THROW(run_calibration(model, corpus(2000), o), InputError);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
