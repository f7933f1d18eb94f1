// `kvshift run` as a user drives it: results in a fresh folder (never mixed with an
// old run), --force replacing one whole, and bad input refused with exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("kvshift-run-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(RunCli, AnExistingOutFolderIsRefusedAndForceReplacesItWhole) {
  const fs::path out = scratch("out");
  ASSERT_EQ(run_kvshift("run --quiet --no-trace --out " + out.string()).exit_code, 0);
  std::ofstream(out / "stale.txt") << "from an older run\n";
  const auto again = run_kvshift("run --quiet --no-trace --out " + out.string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--out: " + out.string() + " already exists"), std::string::npos)
      << again.err;
  EXPECT_TRUE(fs::exists(out / "stale.txt")) << "a refused run touches nothing";
  const auto forced = run_kvshift("run --quiet --no-trace --force --out " + out.string());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(fs::exists(out / "stale.txt")) << "old and new files are never mixed";
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  EXPECT_TRUE(fs::exists(out / "report.html"));
  for (const auto& e : fs::directory_iterator(out.parent_path())) {
    EXPECT_EQ(e.path().string().find(out.string() + ".partial"), std::string::npos)
        << "no staging folder left behind: " << e.path();
  }
  fs::remove_all(out);
}

TEST(RunCli, BadSeedsAreRefusedNamingTheFlag) {
  for (const char* seed : {"-7", "18446744073709551616", "12abc", ""}) {
    const auto r = run_kvshift(std::string("run --quiet --seed '") + seed + "' --out " +
                               scratch("seed").string());
    EXPECT_EQ(r.exit_code, 2) << seed;
    EXPECT_NE(r.err.find("--seed"), std::string::npos) << seed << ": " << r.err;
  }
}

TEST(RunCli, ATooShortDurationIsAnInputError) {
  const fs::path dir = scratch("duration");
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << R"({"name": "x", "model": "qwen2.5-0.5b", "gpu": "h200",
    "cluster": {"nodes": [{"name": "gpu0"}], "links": []},
    "workload": {"arrival": "poisson", "rate": 1, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": 10},
                 "output_tokens": {"distribution": "fixed", "value": 10}},
    "duration": "1e-12s"})";
  for (const std::string& cmd :
       std::vector<std::string>{"validate ", "run --quiet --out " + (dir / "o").string() + " "}) {
    const auto r = run_kvshift(cmd + (dir / "s.json").string());
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("/duration: must be at least 1ms"), std::string::npos) << r.err;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshift::testing
