// Where each ΔNLL per move comes from, from the scenario file to summary.json and the console:
// a hand-written constant says it is one (also when it overrides a calibrated topology), a
// measured file is named with its digest, and ProxyKV's requests over ε are the measured share
// times its moves, or unknown (null), never 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "input/scenario_loader.hpp"
#include "reports/json_text.hpp"
#include "reports/run_report.hpp"
#include "reports/strategy_metrics.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

const std::string kScenarios = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios";

json scenario_json(const std::string& file) {
  std::ifstream in(kScenarios + "/" + file);
  return json::parse(in);
}

json summary_of(const input::ScenarioSpec& spec) {
  const cost_model::RooflineCosts compute(spec.gpu);
  sim::RunOptions options;
  options.record_trace = false;
  options.keep_records = false;
  const auto runs = sim::run_scenario(spec, compute, options);
  return json::parse(json_text(run_summary(spec, runs, compute.sources())));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DeltaNllSource, HandWrittenConstantsSaySoEverywhere) {
  const input::ScenarioSpec spec = input::load_embedded_quickstart();
  const json summary = summary_of(spec);
  for (const auto& [name, s] : summary["strategies"].items()) {
    const json& q = s["quality"];
    EXPECT_EQ(q["risk_kv_delta_nll"], 0.03) << name;
    EXPECT_EQ(q["risk_kv_delta_nll_source"],
              "scenario constant, not measured (risk_kv.delta_nll written by hand)");
    EXPECT_EQ(q["proxy_kv_delta_nll_source"],
              "scenario constant, not measured (proxy_kv.delta_nll written by hand)");
    // A constant says nothing of how many requests exceed ε: unknown, not 0.
    EXPECT_TRUE(q["proxy_kv_expected_requests_over_eps"].is_null()) << name;
    EXPECT_TRUE(has(q["proxy_kv_over_eps_source"], "nothing measured")) << name;
  }
  const std::string table = run_table(summary);
  EXPECT_TRUE(has(table,
                  "dNLL per move (nats/token): risk_kv 0.03000, scenario constant, not "
                  "measured (risk_kv.delta_nll written by hand); proxy_kv 0.05000, "
                  "scenario constant, not measured"))
      << table;
  EXPECT_TRUE(has(table, "proxy_kv requests over eps, proxy_kv: unknown (")) << table;
}

TEST(DeltaNllSource, ACalibratedTopologyIsNamedWithItsDigest) {
  const input::ScenarioSpec spec =
      input::load_scenario_file(kScenarios + "/smollm2-calibrated.json");
  ASSERT_TRUE(spec.risk_kv);
  const std::string& source = spec.risk_kv->delta_nll_source;
  EXPECT_TRUE(source.starts_with(spec.risk_kv->topology_source + " (fnv1a64:")) << source;
  EXPECT_TRUE(source.ends_with("): quality.delta_nll_mean over 48 test requests")) << source;
}

TEST(DeltaNllSource, AHandWrittenOverrideOfACalibratedTopologyIsLabelled) {
  json j = scenario_json("smollm2-calibrated.json");
  j["risk_kv"]["delta_nll"] = 0;
  const input::ScenarioSpec spec = input::load_scenario_text(j.dump(), "override", kScenarios);
  ASSERT_TRUE(spec.risk_kv);
  EXPECT_EQ(spec.risk_kv->delta_nll, 0);
  const std::string& source = spec.risk_kv->delta_nll_source;
  EXPECT_TRUE(
      source.starts_with("scenario constant, not measured (risk_kv.delta_nll written by "
                         "hand; it overrides 8.2249e-05, "))
      << source;
  EXPECT_TRUE(has(source, "topology.json (fnv1a64:")) << source;
  // The summary carries it beside the calibration's over-ε figure.
  const json summary = summary_of(spec);
  const json& q = summary["strategies"]["risk_kv"]["quality"];
  EXPECT_EQ(q["risk_kv_delta_nll_source"], source);
  EXPECT_TRUE(q.contains("over_eps_source"));
}

TEST(DeltaNllSource, ProxyKvChargesTheNamedMapperOfAFileThatMeasuredSeveral) {
  const input::ScenarioSpec spec = input::load_scenario_file(kScenarios + "/smollm2-proxykv.json");
  ASSERT_TRUE(spec.proxy_kv);
  // Measured at 512, 1,024 and 2,048 history tokens; the figure given is the 512 one.
  ASSERT_EQ(spec.proxy_kv->delta_nll_by_context.size(), 3u);
  EXPECT_NEAR(spec.proxy_kv->delta_nll_by_context[1].delta_nll, 0.0045324285049704975, 1e-15);
  EXPECT_EQ(spec.proxy_kv->delta_nll, spec.proxy_kv->delta_nll_by_context[0].delta_nll);
  ASSERT_TRUE(spec.proxy_kv->over_eps_share);
  EXPECT_DOUBLE_EQ(*spec.proxy_kv->over_eps_share, 0.25);  // 8 of 32 requests at 512
  EXPECT_DOUBLE_EQ(spec.proxy_kv->eps, 0.01);
  EXPECT_TRUE(has(spec.proxy_kv->delta_nll_source, "measured at 512, 1024, 2048 history tokens"));
  const json summary = summary_of(spec);
  const json& q = summary["strategies"]["proxy_kv"]["quality"];
  const std::int64_t moves = q["proxy_kv_moves"];
  ASSERT_GT(moves, 0);
  EXPECT_NEAR(q["proxy_kv_expected_requests_over_eps"].get<double>(), 0.25 * moves, 1e-9);
  EXPECT_TRUE(has(q["proxy_kv_over_eps_source"], "quality-kjv-h512.json (fnv1a64:"));

  // One file that measured three mappers: the label picks one.
  json j = scenario_json("smollm2-proxykv.json");
  j["proxy_kv"]["quality"] = "../results/proxykv/smollm2-135m/quality-kjv-global.json";
  ASSERT_TRUE(input::try_load_scenario_text(j.dump(), "one-file", kScenarios).problems.empty());
  j["proxy_kv"].erase("quality_label");
  auto load = input::try_load_scenario_text(j.dump(), "no-label", kScenarios);
  ASSERT_FALSE(load.problems.empty());
  EXPECT_TRUE(has(load.problems.front(), "/proxy_kv/quality: ")) << load.problems.front();
  EXPECT_TRUE(has(load.problems.front(), "name it in quality_label")) << load.problems.front();
  j["proxy_kv"]["quality_label"] = "proxykv-9";
  load = input::try_load_scenario_text(j.dump(), "bad-label", kScenarios);
  ASSERT_FALSE(load.problems.empty());
  EXPECT_TRUE(has(load.problems.front(),
                  "/proxy_kv/quality_label: \"proxykv-9\" is not a ProxyKV "
                  "label of "))
      << load.problems.front();
}

// smollm2-measured-cpu charges RISK-KV from the committed quality files of its topology, at
// each move's context; their means are within noise of 0 and partly below it, which the
// console says next to the table and the ranking reads as no loss.
TEST(DeltaNllSource, RiskKvIsChargedByContextFromTheCommittedFiles) {
  const input::ScenarioSpec spec =
      input::load_scenario_file(kScenarios + "/smollm2-measured-cpu.json");
  ASSERT_TRUE(spec.risk_kv);
  ASSERT_EQ(spec.risk_kv->delta_nll_by_context.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(spec.risk_kv->delta_nll_by_context[i].context, std::int64_t{256} << i);
    EXPECT_LT(std::abs(spec.risk_kv->delta_nll_by_context[i].delta_nll), 0.001) << i;
  }
  EXPECT_TRUE(has(spec.risk_kv->delta_nll_source, "quality-kjv-h256.json (fnv1a64:"))
      << spec.risk_kv->delta_nll_source;
  EXPECT_TRUE(has(spec.risk_kv->delta_nll_source,
                  "measured at 256, 512, 1024, 2048 history tokens; each move is charged at its "
                  "own context"))
      << spec.risk_kv->delta_nll_source;
  const json summary = summary_of(spec);
  const double charged =
      summary["strategies"]["risk_kv"]["quality"]["delta_nll_mean_per_move"].get<double>();
  // Every move's context lies somewhere on the measured curve: the mean is within its range.
  double lo = 1, hi = -1;
  for (const auto& c : spec.risk_kv->delta_nll_by_context) {
    lo = std::min(lo, c.delta_nll);
    hi = std::max(hi, c.delta_nll);
  }
  EXPECT_GE(charged, lo - 1e-12);
  EXPECT_LE(charged, hi + 1e-12);
  const std::string table = run_table(summary);
  EXPECT_EQ(charged < 0, has(table, "risk_kv: dNLL per move is below 0 as measured")) << table;
}

}  // namespace
}  // namespace kvshift::reports
