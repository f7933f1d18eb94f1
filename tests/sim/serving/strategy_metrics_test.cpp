// StrategyMetrics is summary.json's per-strategy entry: read back from real
// summaries of shipped scenarios (every optional section among them), it
// writes the same JSON; a summary missing a key is an InputError that names it.
#include "reports/strategy_metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "reports/run_report.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

// summary.json of a shipped scenario as it lies on disk, run on roofline costs.
json summary_on_disk(const std::string& scenario) {
  const sim::ScenarioSpec spec =
      scenarios::load_scenario_file(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/" + scenario);
  const cost_model::RooflineCosts compute(spec.gpu);
  sim::RunOptions options;
  options.record_trace = false;
  options.keep_records = false;
  const auto runs = sim::run_scenario(spec, compute, options);
  return json::parse(run_summary(spec, runs, compute.sources()).dump(2));
}

const std::vector<json>& summaries() {
  static const std::vector<json> all = [] {
    std::vector<json> s;
    for (const char* f : {"quickstart.json", "pd-disaggregated.json", "kv-tiers.json",
                          "smollm2-calibrated.json", "predictor-sharing.json"}) {
      s.push_back(summary_on_disk(f));
    }
    return s;
  }();
  return all;
}

TEST(StrategyMetrics, ASummaryReadBackWritesTheSameJson) {
  std::vector<std::string> sections;
  for (const json& summary : summaries()) {
    const std::vector<NamedMetrics> read = strategies_from_json(summary);
    ASSERT_EQ(read.size(), summary["strategy_order"].size());
    for (const NamedMetrics& n : read) {
      EXPECT_EQ(to_json(n.metrics).dump(2), summary["strategies"][n.strategy].dump(2))
          << summary["scenario"] << " " << n.strategy;
      const StrategyMetrics& m = n.metrics;
      if (m.handoff) sections.push_back("handoff");
      if (m.prefix_cache && m.prefix_cache->host_tier) sections.push_back("host_tier");
      if (m.slo) sections.push_back("slo");
      if (m.quality.proxy_kv) sections.push_back("proxy_kv");
      if (m.quality.risk_kv) sections.push_back("risk_kv");
      if (m.ttft.without_first_token) sections.push_back("without_first_token");
    }
    json again = summary;
    put_strategies(again, read);
    EXPECT_EQ(again, summary) << summary["scenario"];
  }
  for (const char* s :
       {"handoff", "host_tier", "slo", "proxy_kv", "risk_kv", "without_first_token"}) {
    EXPECT_NE(std::find(sections.begin(), sections.end(), s), sections.end())
        << "no summary exercised " << s;
  }
}

// The message of the InputError reading `summary` throws, or "" when it reads.
std::string read_error(const json& summary) {
  try {
    strategies_from_json(summary);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(StrategyMetrics, AMissingOrMistypedKeyIsNamedByItsPointer) {
  const json& summary = summaries().front();
  const std::string first = summary["strategy_order"][0].get<std::string>();
  json no_fallbacks = summary;
  no_fallbacks["strategies"][first]["moves"].erase("fallbacks");
  EXPECT_EQ(read_error(no_fallbacks),
            "/strategies/" + first + "/moves/fallbacks: missing from the summary");
  json no_strategy = summary;
  no_strategy["strategies"].erase(first);
  EXPECT_EQ(read_error(no_strategy), "/strategies/" + first + ": missing from the summary");
  json text_count = summary;
  text_count["strategies"][first]["requests"]["completed"] = "891";
  EXPECT_EQ(read_error(text_count),
            "/strategies/" + first + "/requests/completed: expected an integer (got \"891\")");
  EXPECT_EQ(read_error(json::object()), "/strategies: missing from the summary");
  EXPECT_THROW(from_json(json{{"events", 1}}), InputError);
}

}  // namespace
}  // namespace kvshift::reports
