// `kvshift sweep` as a user runs it: a small sweep and its files, resume,
// Ctrl-C, the analytic mode, output folders (an existing --out refused,
// --force replacing it whole, a fresh default folder per sweep), conflicting
// flags and bad input (exit 2 with the field named).
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <string>
#include <vector>

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
      {"sweep --analytic --omit 0..40", "--omit: qwen2.5-1.5b has 14 groups"},
      {"sweep --analytic --bandwidth 10Gbps..1Gbps:5", "--bandwidth: LO must be below HI"},
      {"sweep --analytic --bandwidth 0Gbps..1Gbps:5",
       "--bandwidth: every bandwidth must be > 0 and finite (got \"0Gbps\")"},
      {"sweep --analytic --bandwidth 1Mbps..1Gbps:100000000",
       "--bandwidth: the count after ':' must be an integer in [2, 1000000]"},
      {"sweep --analytic --bandwidth 1Mbps..1Gbps:1000000 --tokens 1..100000:1000",
       "--bandwidth/--tokens/--omit: "},
      {"sweep --analytic --max-rows 100000000000", "--max-rows: at most 10000000"},
  };
  for (const Case& c : cases) {
    const auto r = run_kvshift(c.args + " --out " + fresh("bad").string());
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
  const auto resume = run_kvshift("sweep --resume /nonexistent-dir");
  EXPECT_EQ(resume.exit_code, 2) << resume.err;
  EXPECT_NE(resume.err.find("--resume: /nonexistent-dir/sweep.json does not exist"),
            std::string::npos)
      << resume.err;
}

// Each of these used to be resolved silently: one value won, or one flag was ignored.
TEST(SweepCli, ConflictingOrRepeatedFlagsAreExitTwoNamingThem) {
  const auto done = fresh("conflict-done");
  const std::string one =
      " --set /cluster/star/bandwidth=2Gbps --set '/policies/strategies=[\"risk_kv\"]'";
  ASSERT_EQ(run_kvshift("sweep " + tiny() + one + " --no-report --quiet --out " + done.string())
                .exit_code,
            0);
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"sweep " + tiny() +
           " --set /cluster/star/bandwidth=1Gbps --set /cluster/star/bandwidth=2Gbps --out " +
           fresh("twice").string(),
       "--set: /cluster/star/bandwidth is set twice (\"/cluster/star/bandwidth=1Gbps\" and "
       "\"/cluster/star/bandwidth=2Gbps\")"},
      {"sweep " + tiny() + " --set /seed=1,2 --seed 5 --out " + fresh("seed").string(),
       "--seed and --set /seed=1,2: both set the seed; drop one"},
      {"sweep --resume " + done.string() + " --out " + fresh("elsewhere").string(),
       "--out and --resume: a resumed sweep continues in its own folder"},
      {"sweep --resume " + done.string() + " --force", "--force and --resume"},
      {"sweep " + tiny() + " --set /cluster/star/bandwidth=1Gbps --bandwidth 2Gbps --out " +
           fresh("analytic-only").string(),
       "--bandwidth: only with --analytic"},
      {"sweep --analytic --seed 3 --out " + fresh("analytic-seed").string(),
       "--analytic: takes --bandwidth/--tokens/--omit, not --set, --resume, --seed"},
  };
  for (const Case& c : cases) {
    const auto r = run_kvshift(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(fresh("elsewhere")));
}

// An earlier sweep's folder is refused; --force replaces it whole, so no stale point remains.
TEST(SweepCli, AnExistingOutIsRefusedAndForceReplacesItWhole) {
  const auto dir = fresh("existing");
  ASSERT_EQ(
      run_kvshift("sweep " + tiny() + kTwoPoints + " --no-report --quiet --out " + dir.string())
          .exit_code,
      0);
  ASSERT_TRUE(std::filesystem::exists(dir / "points/1/summary.json"));
  const std::string one =
      " --set /cluster/star/bandwidth=5Gbps --set '/policies/strategies=[\"risk_kv\"]'";
  const auto refused =
      run_kvshift("sweep " + tiny() + one + " --no-report --quiet --out " + dir.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--out: " + dir.string() + " already exists"), std::string::npos)
      << refused.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "points/1/summary.json"));  // untouched

  const auto forced =
      run_kvshift("sweep " + tiny() + one + " --no-report --quiet --force --out " + dir.string());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(lines(slurp((dir / "sweep.csv").string())), 2);
  EXPECT_TRUE(std::filesystem::exists(dir / "points/0/summary.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "points/1")) << "a stale point survived --force";
  EXPECT_NE(slurp((dir / "sweep.json").string()).find("5Gbps"), std::string::npos);
  std::filesystem::path parent = dir.parent_path();
  for (const auto& e : std::filesystem::directory_iterator(parent)) {
    EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos) << e.path();
  }

  // An analytic sweep's folder is refused and replaced the same way.
  const auto analytic = fresh("existing-analytic");
  const std::string grid = " --bandwidth 1Gbps,2Gbps --tokens 256 --omit 0 --no-report --out ";
  ASSERT_EQ(run_kvshift("sweep --analytic" + grid + analytic.string()).exit_code, 0);
  EXPECT_EQ(run_kvshift("sweep --analytic" + grid + analytic.string()).exit_code, 2);
  EXPECT_EQ(run_kvshift("sweep --analytic --force" + grid + analytic.string()).exit_code, 0);
}

// Two sweeps started together without --out each get a folder of their own.
TEST(SweepCli, TheDefaultFolderIsFreshForEverySweep) {
  const auto cwd = fresh("default");
  std::filesystem::create_directories(cwd);
  const std::string sweep =
      kvshift_exe() + " sweep " + tiny() + kTwoPoints + " --no-report --quiet";
  const auto r =
      run_command("cd " + cwd.string() + " && (" + sweep + " & " + sweep + " & wait) && " + sweep);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> folders;
  for (const auto& e : std::filesystem::directory_iterator(cwd / "kvshift-out")) {
    folders.push_back(e.path().filename().string());
    EXPECT_EQ(lines(slurp((e.path() / "sweep.csv").string())), 3) << e.path();
    EXPECT_FALSE(std::filesystem::exists(e.path() / "points/2")) << e.path();
  }
  EXPECT_EQ(folders.size(), 3u);
  for (const std::string& f : folders) EXPECT_EQ(f.rfind("sweep-", 0), 0u) << f;
  std::filesystem::remove_all(cwd);
}

}  // namespace
}  // namespace kvshift::testing
