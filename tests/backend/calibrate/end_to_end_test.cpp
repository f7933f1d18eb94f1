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
#include "input/spec_files.hpp"
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
  o.counts = {4, 3, 3, 2, 3};
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
  // Prefixes are measured until two in a row pass no gate at the loosest eps (0.01).
  ASSERT_GE(r.prefixes.size(), 1u);
  ASSERT_LE(r.prefixes.size(), 3u);
  if (r.prefixes.size() < 3) {
    EXPECT_NE(r.stop_reason.find("pass no gate"), std::string::npos);
  }
  // Cross-fitted: singles on the 3 order requests, prefixes on the 3 selection requests.
  EXPECT_TRUE(r.cross_fitted);
  for (const auto& d : r.single_deltas) EXPECT_EQ(d.size(), 3u);
  for (std::size_t k = 0; k < r.prefixes.size(); ++k) {
    EXPECT_EQ(r.prefixes[k].deltas.size(), 3u);
    EXPECT_DOUBLE_EQ(r.prefixes[k].mean, mean_of(r.prefixes[k].deltas));
    EXPECT_EQ(r.prefixes[k].groups.size(), k + 1);
    EXPECT_TRUE(std::isfinite(r.prefixes[k].mean));
    EXPECT_TRUE(r.prefixes[k].confirm_upper90.has_value());
  }
  // The frontier: the chosen row, then four gates (a confirmation set was given) at four ε;
  // each choice is what choose_prefix says, and a looser ε never omits less.
  ASSERT_EQ(r.gates.size(), 1u + 4u * 4u);
  EXPECT_EQ(r.chosen().rule.gate, Gate::kUpper90);
  EXPECT_EQ(r.chosen().eps, 0.002);
  for (std::size_t i = 0; i < r.gates.size(); ++i) {
    const GateChoice& g = r.gates[i];
    EXPECT_EQ(g.prefix, choose_prefix(r.prefixes, g.rule, g.eps));
    if (i > 1 && r.gates[i - 1].rule == g.rule) {
      EXPECT_GT(g.eps, r.gates[i - 1].eps);
      EXPECT_GE(g.test.omitted_fraction, r.gates[i - 1].test.omitted_fraction);
    }
    EXPECT_EQ(g.test.violations, count_over(g.test.per_request, g.eps));
    EXPECT_LE(g.test.share_ci95_low, g.test.violation_share);
    EXPECT_GE(g.test.share_ci95_high, g.test.violation_share);
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
  EXPECT_EQ(r.chosen().test.violation_share, 0.0);
  ASSERT_EQ(r.predictors.size(), 3u);
  // G2-G4 omitted together: each reads G1 (layers 0,1) and G5 (layers 8,9).
  for (const FittedGroup& f : r.predictors) {
    EXPECT_EQ(f.predictor.anchor_layers, (std::vector<int>{0, 1, 8, 9}));
  }
  const RunInfo info{"tiny", "corpus", 2000, cost_model::DType::kF16, 1.0, 1.0};
  // topology.json -> the scenarios reader gives the same topology.
  const input::Json topo = topology_json(r, model.spec(), info);
  input::Diagnostics diag;
  const cost_model::OmissionPlan t =
      input::parse_topology(input::Reader(topo, "", diag), model.spec());
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
  EXPECT_NE(frontier_svg(r).find("<polyline"), std::string::npos);
  // The scenarios read the test set's ΔNLL and share over ε from topology.json.
  EXPECT_EQ(topo["quality"]["set"], "test");
  EXPECT_EQ(topo["quality"]["delta_nll_mean"].get<double>(), r.chosen().test.delta_nll_mean);
  EXPECT_EQ(topo["quality"]["violation_share"].get<double>(), r.chosen().test.violation_share);
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
  // A candidate without as many layers on a side as its predictor reads anchors.
  o = options(0.002);
  o.anchor_width = 3;
  o.candidates = {2};
  try {
    run_calibration(model, corpus(2000), o);
    ADD_FAILURE() << "G2 has 2 layers on its left";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--groups: G2 has 2 layer(s) on a side, fewer than the 3 "
                                         "exact anchor layers its predictor reads"),
              std::string::npos)
        << e.what();
  }
}

TEST(CalibrationEndToEnd, InteriorGroupsLeaveEveryCandidateItsAnchors) {
  EXPECT_EQ(interior_groups(30, 2, 2),
            (std::vector<int>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));
  EXPECT_EQ(interior_groups(30, 2, 3), (std::vector<int>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(interior_groups(8, 1, 1), (std::vector<int>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(interior_groups(7, 3, 1), (std::vector<int>{2}));  // G3 is the one layer 6
  EXPECT_TRUE(interior_groups(7, 3, 2).empty());
  EXPECT_TRUE(interior_groups(8, 2, 3).empty());
  // Property: every subset of the candidates leaves each omitted group its anchors.
  for (int layers : {8, 12, 30}) {
    for (int gw = 1; gw <= 3; ++gw) {
      for (int aw = 1; aw <= 3; ++aw) {
        const std::vector<int> c = interior_groups(layers, gw, aw);
        if (c.empty()) continue;
        EXPECT_NO_THROW(cost_model::OmissionPlan::from_groups(layers, c, {gw, aw}))
            << layers << " " << gw << " " << aw;
        EXPECT_NO_THROW(cost_model::OmissionPlan::from_groups(layers, {c.front()}, {gw, aw}));
        EXPECT_NO_THROW(cost_model::OmissionPlan::from_groups(layers, {c.back()}, {gw, aw}));
      }
    }
  }
}

}  // namespace
}  // namespace kvshift::backend::calibrate
