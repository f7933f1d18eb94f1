// StrategyMetrics is summary.json's per-strategy entry: read back from real
// summaries of shipped scenarios (every optional section among them), it
// writes the same JSON; a summary missing a key is an InputError that names it.
#include "reports/strategy_metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "input/scenario_loader.hpp"
#include "reports/json_text.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

// summary.json of a shipped scenario as a run writes it to disk, run on roofline costs.
json summary_on_disk(const std::string& scenario) {
  const input::ScenarioSpec spec =
      input::load_scenario_file(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/" + scenario);
  const cost_model::RooflineCosts compute(spec.gpu);
  sim::RunOptions options;
  options.record_trace = false;
  options.keep_records = false;
  const auto runs = sim::run_scenario(spec, compute, options);
  return json::parse(json_text(run_summary(spec, runs, compute.sources(), true)));
}

const std::vector<json>& summaries() {
  static const std::vector<json> all = [] {
    std::vector<json> s;
    for (const char* f :
         {"quickstart.json", "pd-disaggregated.json", "kv-tiers.json", "smollm2-calibrated.json",
          "predictor-sharing.json", "hbm-pressure.json"}) {
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
      if (m.prefix_cache && m.prefix_cache->ssd_tier) sections.push_back("ssd_tier");
      if (m.slo) sections.push_back("slo");
      if (m.preemption) sections.push_back("preemption");
      if (m.quality.proxy_kv) sections.push_back("proxy_kv");
      if (m.quality.risk_kv) sections.push_back("risk_kv");
      if (m.ttft.without_first_token) sections.push_back("without_first_token");
      if (m.busiest_link && !m.busiest_link->t_s.empty()) sections.push_back("busiest_link");
    }
    json again = summary;
    put_strategies(again, read);
    EXPECT_EQ(again, summary) << summary["scenario"];
  }
  for (const char* s : {"handoff", "host_tier", "slo", "proxy_kv", "risk_kv", "without_first_token",
                        "busiest_link", "preemption"}) {
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
  json short_series = summary;
  json& series = short_series["strategies"][first]["busiest_link"];
  const std::size_t n = series["utilisation"].size();
  series["t_s"].push_back(1e9);
  EXPECT_EQ(read_error(short_series),
            "/strategies/" + first + "/busiest_link: t_s and utilisation differ in length (" +
                std::to_string(n + 1) + " and " + std::to_string(n) + ")");
}

// A run with more sampled instants than the series keeps: at most kMaxBusiestLinkPoints points,
// in time order, each at a sampled instant and the peak of every link at every instant of its
// span; the run's peak survives.
TEST(StrategyMetrics, TheBusiestLinkSeriesKeepsEachSpansPeak) {
  const input::ScenarioSpec spec = input::load_embedded_quickstart();
  for (const std::int64_t instants : {std::int64_t{7}, std::int64_t{2000}, std::int64_t{4999}}) {
    sim::RunResult run;
    run.duration_ns = 1'000'000'000;
    std::map<std::int64_t, double> want;  // t_ns -> peak over the links
    for (std::int64_t i = 0; i < instants; ++i) {
      const std::int64_t t = 1000 + i * 250'000;
      for (int link = 0; link < 3; ++link) {
        const double u = ((i * 7919 + link * 104729) % 1000) / 1000.0;
        run.link_samples.push_back({t, "L" + std::to_string(link), u, 1, 1e9});
        want[t] = std::max(want[t], u);
      }
    }
    const StrategyMetrics m = strategy_metrics(spec, run, true);
    ASSERT_TRUE(m.busiest_link);
    const BusiestLink& b = *m.busiest_link;
    ASSERT_EQ(b.t_s.size(), b.utilisation.size());
    ASSERT_EQ(b.t_s.size(), std::min<std::size_t>(want.size(), kMaxBusiestLinkPoints));
    // Each point opens a span that runs to the next point: its value is that span's peak.
    auto it = want.begin();
    for (std::size_t p = 0; p < b.t_s.size(); ++p) {
      ASSERT_NE(it, want.end());
      EXPECT_NEAR(b.t_s[p], static_cast<double>(it->first) * 1e-9, 1e-12) << p;
      const double end = p + 1 < b.t_s.size() ? b.t_s[p + 1] : 1e300;
      double peak = 0;
      for (; it != want.end() && static_cast<double>(it->first) * 1e-9 < end - 1e-12; ++it) {
        peak = std::max(peak, it->second);
      }
      EXPECT_DOUBLE_EQ(b.utilisation[p], peak) << "point " << p << " of " << instants;
    }
    EXPECT_EQ(it, want.end());
    double run_peak = 0;
    for (const auto& [t, u] : want) run_peak = std::max(run_peak, u);
    EXPECT_DOUBLE_EQ(*std::max_element(b.utilisation.begin(), b.utilisation.end()), run_peak);
    EXPECT_FALSE(strategy_metrics(spec, run).busiest_link);  // only when asked for
  }
}

// json_text writes what dump(2) writes, except that arrays of plain values stay on one line.
TEST(SummaryText, IsDumpTwoWithFlatArraysOnOneLine) {
  const json j = {{"a", {{"b", 1}, {"c", "x"}}},
                  {"series", {0.5, 1, 2}},
                  {"empty", json::array()},
                  {"none", json::object()},
                  {"rows", {{{"k", 1}}, {{"k", 2}}}}};
  EXPECT_EQ(json_text(j),
            "{\n"
            "  \"a\": {\n"
            "    \"b\": 1,\n"
            "    \"c\": \"x\"\n"
            "  },\n"
            "  \"empty\": [],\n"
            "  \"none\": {},\n"
            "  \"rows\": [\n"
            "    {\n"
            "      \"k\": 1\n"
            "    },\n"
            "    {\n"
            "      \"k\": 2\n"
            "    }\n"
            "  ],\n"
            "  \"series\": [0.5, 1, 2]\n"
            "}\n");
  for (const json& summary : summaries()) {
    EXPECT_EQ(json::parse(json_text(summary)), summary);
    json nested = summary;
    nested["strategies"] = json::object();  // what is left has no flat arrays
    nested.erase("strategy_order");
    EXPECT_EQ(json_text(nested), nested.dump(2) + "\n");
  }
}

}  // namespace
}  // namespace kvshift::reports
