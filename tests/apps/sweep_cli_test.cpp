// `kvshift sweep` as a user runs it: a small sweep and its files, resume,
// Ctrl-C, the analytic mode, and bad input (exit 2 with the field named).
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

std::string tiny() { return std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep/data/tiny.json"; }

std::filesystem::path fresh(const std::string& name) {
  const auto dir = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out" / "sweep-cli" /
                   (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

long lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

const char* const kTwoPoints =
    " --set /cluster/star/bandwidth=2Gbps,20Gbps --set '/policies/strategies=[\"risk_kv\"]'";

TEST(SweepCli, WritesTheTablePointSummariesAndAReport) {
  const auto dir = fresh("basic");
  const auto r = run_kvshift("sweep " + tiny() + kTwoPoints + " --jobs 2 --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sweep: 2 points (2 simulated now, 0 already done)"), std::string::npos)
      << r.out;
  const std::string csv = slurp((dir / "sweep.csv").string());
  EXPECT_EQ(lines(csv), 3);
  EXPECT_EQ(
      csv.rfind("point,seed,/cluster/star/bandwidth,/policies/strategies,risk_kv.completed,", 0),
      0u)
      << csv;
  EXPECT_TRUE(std::filesystem::exists(dir / "points/0/summary.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "points/1/summary.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "wall.json"));
  EXPECT_EQ(csv.find("wall"), std::string::npos);

  const auto again = run_kvshift("sweep --resume " + dir.string() + " --no-report");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("(0 simulated now, 2 already done)"), std::string::npos) << again.out;
  EXPECT_EQ(slurp((dir / "sweep.csv").string()), csv);
}

TEST(SweepCli, CtrlCKeepsFinishedPointsAndResumeFinishesTheSweep) {
  const auto dir = fresh("sigint");
  std::string seeds;
  // ~4 s of work at --jobs 1 on a fast core, so the interrupt after 1 s lands mid-sweep.
  // --foreground: one SIGINT to kvshift, as a Ctrl-C sends; without it timeout also signals
  // its process group, and the second SIGINT ends kvshift at once (as a second Ctrl-C should).
  for (int i = 1; i <= 400; ++i) seeds += (i > 1 ? "," : "") + std::to_string(i);
  const std::string sets =
      " --set /duration=60s --set /seed=" + seeds + " --set '/policies/strategies=[\"full_kv\"]'";
  const auto r =
      run_command("timeout --foreground --preserve-status -s INT 1 " + kvshift_exe() + " sweep " +
                  tiny() + sets + " --jobs 1 --no-report --out " + dir.string());
  if (r.exit_code == 0) GTEST_SKIP() << "the sweep finished before the interrupt";
  ASSERT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("resume with: kvshift sweep --resume " + dir.string()), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "sweep.csv"));
  const auto done = run_kvshift("sweep --resume " + dir.string() + " --jobs 2 --no-report");
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_EQ(lines(slurp((dir / "sweep.csv").string())), 401);
  EXPECT_EQ(done.out.find("(0 simulated now"), std::string::npos) << done.out;
}

TEST(SweepCli, AnalyticSweepWritesTheCrossoverMap) {
  const auto dir = fresh("analytic");
  const auto r = run_kvshift(
      "sweep --analytic --model qwen2.5-0.5b --bandwidth 1Mbps..100Gbps:11 --tokens 256,4096 "
      "--omit 0..2 --no-report --out " +
      dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("66 points (11 bandwidths x 2 context lengths x 3 omitted-group counts)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(lines(slurp((dir / "analytic.csv").string())), 67);
  EXPECT_EQ(lines(slurp((dir / "crossover.csv").string())), 7);
  EXPECT_GE(lines(slurp((dir / "winners.csv").string())), 7);
}

TEST(SweepCli, BadInputIsExitTwoNamingTheField) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"sweep " + tiny() + " --set /cluster/links/*/bandwidth=1Gbps",
       "/cluster/links/*/bandwidth: matches nothing"},
      {"sweep " + tiny() + " --set /cluster/star/bandwidth=1Gbps,quick",
       "point 1 (/cluster/star/bandwidth=quick)"},
      {"sweep " + tiny() + " --set cluster=1", "--set: the pointer must start with '/'"},
      {"sweep " + tiny(), "--set: give at least one"},
      {"sweep --resume /nonexistent-dir", "--resume: /nonexistent-dir/sweep.json does not exist"},
      {"sweep --analytic --omit 0..40", "--omit: qwen2.5-1.5b has 14 groups"},
      {"sweep --analytic --bandwidth 10Gbps..1Gbps:5", "--bandwidth: LO must be below HI"},
  };
  for (const Case& c : cases) {
    const auto r = run_kvshift(c.args + " --out " + fresh("bad").string());
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace kvshift::testing
