// report.html in a real browser: headless Chromium loads the reports of a run
// of the tiny scenario, of a small sweep and of an analytic sweep; each page
// must report `charts-ok N` (every chart drew marks), log no script error, and
// leave a screenshot under <build>/test-out/report-browser/ as an artefact.
// Skips (with the reason) only when chromium is not installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "tests/sweep/sweep_test_util.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::sweep {
namespace {

using kvshift::testing::run_command;
using kvshift::testing::run_kvshift;

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0)
      return name;
  }
  return "";
}

std::filesystem::path artefacts() {
  const auto dir = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out" / "report-browser";
  std::filesystem::create_directories(dir);
  return dir;
}

// Loads `page` headless; returns the DOM and checks for script errors in the log.
void expect_page_draws(const std::string& browser, const std::filesystem::path& page, int charts,
                       const std::string& shot, std::string* dom_out = nullptr) {
  // A profile folder of its own: the tests of this file may run at the same time.
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--enable-logging=stderr --v=0 --virtual-time-budget=10000 --user-data-dir=" +
      (artefacts() / ("profile-" + shot)).string() + " ";
  const auto dom =
      run_command("timeout 120 " + browser + flags + "--dump-dom file://" + page.string());
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  if (dom_out) *dom_out = dom.out;
  const std::regex status("id=\"kvshift-status\"[^>]*>([^<]*)<");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom.out, m, status)) << "no status element";
  EXPECT_EQ(m[1].str(), "charts-ok " + std::to_string(charts));
  for (const char* bad : {"Uncaught", "SyntaxError", "TypeError", "ReferenceError"}) {
    EXPECT_EQ(dom.err.find(bad), std::string::npos) << dom.err;
  }
  const auto png = artefacts() / shot;
  std::filesystem::remove(png);
  const auto s = run_command("timeout 120 " + browser + flags +
                             "--hide-scrollbars --window-size=1150,2600 "
                             "--screenshot=" +
                             png.string() + " file://" + page.string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
}

TEST(ReportBrowser, RunReportDrawsEveryChart) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto dir = artefacts() / "run";
  std::filesystem::remove_all(dir);
  auto r =
      run_kvshift("run " + testing::tiny_scenario() + " --quiet --no-trace --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_kvshift("report " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string dom;
  expect_page_draws(browser, dir / "report.html", 4, "run-report.png", &dom);
  // The page leads with the answer, and a chart with no data is a sentence, not a blank canvas.
  EXPECT_NE(dom.find(". Ranked by failed requests, then moves unfinished at the end"),
            std::string::npos);
  // and says where each method's ΔNLL per move comes from (tiny.json's is a constant).
  EXPECT_NE(dom.find("scenario constant, not measured"), std::string::npos);
  EXPECT_NE(dom.find("No migrations in this run: no migration-latency CDF."), std::string::npos);
}

TEST(ReportBrowser, SeveralDeploymentsGetATableOfTheirOwn) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto dir = artefacts() / "run-deployments";
  std::filesystem::remove_all(dir);
  auto r = run_kvshift("run " + std::string(KVSHIFT_SOURCE_DIR) +
                       "/scenarios/multi-model.json --quiet --no-trace --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_kvshift("report " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string dom;
  expect_page_draws(browser, dir / "report.html", 4, "run-deployments-report.png", &dom);
  EXPECT_NE(dom.find("<h3>Deployments</h3>"), std::string::npos);
  // One row per (strategy, deployment): 4 strategies x 2 deployments name their models.
  std::size_t rows = 0;
  for (std::size_t at = dom.find("<td>qwen2.5-7b</td>"); at != std::string::npos;
       at = dom.find("<td>qwen2.5-7b</td>", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 4u);
  EXPECT_NE(dom.find("<td>llama-3.1-8b</td>"), std::string::npos);
}

TEST(ReportBrowser, SweepAndAnalyticReportsDrawLinesAndHeatMaps) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto sweep_dir = artefacts() / "sweep";
  std::filesystem::remove_all(sweep_dir);
  auto r = run_kvshift(
      "sweep " + testing::tiny_scenario() +
      " --set /cluster/star/bandwidth=1Gbps,25Gbps --set /workload/rate=2,3"
      " --set '/policies/strategies=[\"full_kv\",\"token_replay\"]' --jobs 2 --quiet --out " +
      sweep_dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 metrics x 3 axes of lines, plus one heat map
  expect_page_draws(browser, sweep_dir / "report.html", 7, "sweep-report.png");
  const auto an = artefacts() / "analytic";
  std::filesystem::remove_all(an);
  r = run_kvshift(
      "sweep --analytic --bandwidth 1Mbps..1Tbps:80 --tokens 64..65536:40 --omit 0..3 --quiet "
      "--out " +
      an.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_page_draws(browser, an / "report.html", 4, "analytic-report.png");
}

}  // namespace
}  // namespace kvshift::sweep
