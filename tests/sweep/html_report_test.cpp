// report.html data and page: charts gathered from a real run folder and a
// sweep table, and a page that inlines Chart.js and its data safely.
#include "reports/html_report.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/scenario_loader.hpp"
#include "reports/atomic_file.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sweep/sweep_plan.hpp"
#include "tests/sweep/sweep_test_util.hpp"
#include "util/csv.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

TEST(HtmlReport, RunFolderGivesOneChartPerViewWithCompleteCdfs) {
  const input::ScenarioSpec spec = input::load_scenario_file(sweep::testing::tiny_scenario());
  const auto compute = sweep::roofline_costs(spec);
  sim::RunOptions options;
  options.record_trace = false;
  const auto runs = sim::run_scenario(spec, *compute, options);
  const auto dir = sweep::testing::scratch("report-run");
  write_run_outputs(dir, spec, runs, compute->sources());
  const json data = report_data(dir);
  ASSERT_TRUE(data.contains("run"));
  const json& charts = data["run"]["charts"];
  ASSERT_EQ(charts.size(), 4u);
  EXPECT_EQ(charts[0]["title"], "Recovery latency CDF (unfinished moves at their lower bound)");
  EXPECT_EQ(charts[0]["data"]["datasets"].size(), runs.size());  // every strategy recovered
  // The tiny scenario has no migrations: the report says so in words instead of a blank chart.
  EXPECT_EQ(data["run"]["notes"], json({"No migrations in this run: no migration-latency CDF."}));
  // Where each op's GPU durations came from travels with the summary into the page.
  const json& costs = data["run"]["summary"]["cost_sources"];
  ASSERT_EQ(costs.size(), 5u);
  EXPECT_EQ(costs["decode"]["source"], "analytic (roofline of " + spec.gpu.name + ")");
  for (const json& set : charts[0]["data"]["datasets"]) {
    const json& pts = set["data"];
    ASSERT_FALSE(pts.empty());
    EXPECT_DOUBLE_EQ(pts.back()["y"].get<double>(), 1.0);
    for (std::size_t i = 1; i < pts.size(); ++i) EXPECT_LE(pts[i - 1]["x"], pts[i]["x"]);
  }
  EXPECT_EQ(charts[1]["data"]["labels"].size(), runs.size());
  // What the moves sent (kv, predictors, tokens); replica streams would hide them.
  EXPECT_EQ(charts[1]["data"]["datasets"].size(), 3u);
  for (const json& set : charts[1]["data"]["datasets"]) EXPECT_NE(set["label"], "replica_stream");
  EXPECT_EQ(charts[3]["data"]["datasets"].size(), 5u);  // GPU time kinds
  // The link chart is each strategy's busiest-link series from summary.json: at every sampled
  // instant the peak of links.csv's rows (the run has fewer instants than the series keeps).
  ASSERT_EQ(charts[2]["title"].get<std::string>().rfind("Link utilisation over time", 0), 0u);
  std::map<std::string, std::map<double, double>> peak;  // strategy -> t_s -> utilisation
  std::ifstream links(dir / "links.csv");
  std::string comment;
  std::getline(links, comment);
  std::vector<std::string> row;
  ASSERT_TRUE(util::read_csv_record(links, row));  // the header
  while (util::read_csv_record(links, row)) {
    double& p = peak[row[0]][std::stod(row[1])];
    p = std::max(p, std::stod(row[3]));
  }
  ASSERT_EQ(charts[2]["data"]["datasets"].size(), peak.size());
  for (const json& set : charts[2]["data"]["datasets"]) {
    const auto& want = peak.at(set["label"].get<std::string>());
    ASSERT_EQ(set["data"].size(), want.size()) << set["label"];
    auto it = want.begin();
    for (const json& pt : set["data"]) {
      EXPECT_DOUBLE_EQ(pt["x"].get<double>(), it->first);
      EXPECT_DOUBLE_EQ(pt["y"].get<double>(), it->second);
      ++it;
    }
  }
  // ... and the page never reads links.csv back.
  std::filesystem::remove(dir / "links.csv");
  EXPECT_EQ(report_data(dir)["run"]["charts"], charts);
  // A summary without the series (an older kvshift's) says why the chart is missing.
  json summary = input::read_json_file((dir / "summary.json").string());
  for (auto& [name, entry] : summary["strategies"].items()) entry.erase("busiest_link");
  write_file_atomic(dir / "summary.json", summary.dump(2));
  const json older = report_data(dir)["run"];
  EXPECT_EQ(older["charts"].size(), 3u);
  EXPECT_EQ(older["notes"].back(),
            "summary.json has no busiest_link series (an older kvshift wrote it): no "
            "link-utilisation chart.");
  const std::string page = render_html_report(data, "/* chart.js */");
  EXPECT_NE(page.find("/* chart.js */"), std::string::npos);
  EXPECT_NE(page.find("id=\"kvshift-status\""), std::string::npos);
  EXPECT_NE(page.find("Where the GPU durations came from"), std::string::npos);
}

TEST(HtmlReport, SweepTableGivesLinesPerStrategyAndAWinnerHeatMap) {
  const auto dir = sweep::testing::scratch("report-sweep");
  write_file_atomic(dir / "sweep.csv",
                    "point,seed,/bw,/n,a.recovery_p99_s,a.kv_bytes,b.recovery_p99_s,b.kv_bytes\n"
                    "0,1,1Gbps,1,2.0,10,1.0,5\n"
                    "1,2,1Gbps,2,0.5,10,1.0,5\n"
                    "2,3,10Gbps,1,0.2,10,,5\n"
                    "3,4,10Gbps,2,0.3,10,0.1,5\n");
  const json data = report_data(dir);
  const json& lines = data["sweep"]["lines"];
  ASSERT_EQ(lines.size(), 4u);  // 2 metrics x 2 axes
  EXPECT_EQ(lines[0]["data"]["labels"], json({"1Gbps", "10Gbps"}));
  EXPECT_EQ(lines[0]["data"]["datasets"][0]["data"], json({2.0, 0.2}));  // a along /bw at /n=1
  EXPECT_EQ(lines[0]["data"]["datasets"][1]["data"],
            json({1.0, nullptr}));  // b has no value at 10Gbps
  const json& heat = data["sweep"]["heatmaps"][0];
  // cells: (1Gbps,1)->b, (1Gbps,2)->a, (10Gbps,1)->a, (10Gbps,2)->b
  EXPECT_EQ(heat["rects"], json::parse("[[0,1,0,1,1],[1,2,0,1,0],[0,1,1,2,0],[1,2,1,2,1]]"));
  EXPECT_EQ(heat["categories"], json({"a", "b", "tie"}));
}

TEST(HtmlReport, EqualValuesAreATieAndEmptyLinesBecomeNotes) {
  const auto dir = sweep::testing::scratch("report-tie");
  write_file_atomic(dir / "sweep.csv",
                    "point,seed,/bw,/n,a.recovery_p99_s,a.kv_bytes,b.recovery_p99_s,b.kv_bytes\n"
                    "0,1,1Gbps,1,0.5,,0.5,\n"
                    "1,2,1Gbps,2,0.7,,0.5,\n");
  const json data = report_data(dir);
  EXPECT_EQ(data["sweep"]["heatmaps"][0]["rects"], json::parse("[[0,1,0,1,2],[0,1,1,2,1]]"));
  // kv_bytes is empty everywhere: no chart, a note instead (recovery p99 along /bw and /n remain)
  EXPECT_EQ(data["sweep"]["lines"].size(), 2u);
  EXPECT_EQ(data["sweep"]["notes"].size(), 2u);
}

TEST(HtmlReport, DataCannotCloseTheScriptElement) {
  const std::string page = render_html_report(json{{"x", "</script><b>"}}, "");
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_NE(page.find("<\\/script><b>"), std::string::npos);
}

// A run writes its page in a staging folder ("NAME.partial-PID") that it then renames, and two
// runs of one scenario land in folders of different names: the page depends on the files only.
TEST(HtmlReport, TheSameFilesGiveTheSamePageWhateverTheFolderIsCalled) {
  const input::ScenarioSpec spec = input::load_scenario_file(sweep::testing::tiny_scenario());
  const auto compute = sweep::roofline_costs(spec);
  sim::RunOptions options;
  options.record_trace = false;
  const auto runs = sim::run_scenario(spec, *compute, options);
  const auto a = sweep::testing::scratch("report-same.partial-24926");
  const auto b = sweep::testing::scratch("report-same-b");
  write_run_outputs(a, spec, runs, compute->sources());
  write_run_outputs(b, spec, sim::run_scenario(spec, *compute, options), compute->sources());
  const std::string page = render_html_report(report_data(a), "/* chart.js */");
  EXPECT_EQ(page, render_html_report(report_data(b), "/* chart.js */"));
  EXPECT_EQ(page.find("partial"), std::string::npos);
  EXPECT_EQ(page.find("report-same"), std::string::npos);
}

TEST(HtmlReport, AnEmptyFolderIsAnInputError) {
  EXPECT_THROW(report_data(sweep::testing::scratch("report-empty")), InputError);
}

}  // namespace
}  // namespace kvshift::reports
