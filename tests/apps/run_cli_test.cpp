// `kvshift run` as a user drives it: results in a fresh folder (never mixed with an
// old run), --force replacing one whole, and bad input refused with exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

/// The quickstart cut to `duration` with no events, written to `path`.
void write_short_quickstart(const fs::path& path, const std::string& duration = "5s",
                            const std::string& extra_outputs = "", double rate = 0) {
  nlohmann::json j =
      nlohmann::json::parse(slurp(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/quickstart.json"));
  j["duration"] = duration;
  j["events"] = nlohmann::json::array();
  if (!extra_outputs.empty()) j["outputs"] = nlohmann::json::parse(extra_outputs);
  if (rate > 0) j["workload"]["rate"] = rate;
  fs::create_directories(path.parent_path());
  std::ofstream(path) << j.dump(2);
}

TEST(RunCli, ForceNeverDeletesTheScenarioOrAFolderKvshiftDidNotWrite) {
  const fs::path dir = scratch("force");
  write_short_quickstart(dir / "s.json");
  std::ofstream(dir / "notes.txt") << "mine\n";
  // The folder holds the scenario and a note, no earlier output: refused, untouched.
  auto r =
      run_kvshift("run " + (dir / "s.json").string() + " --quiet --force --out " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: " + dir.string() + " is not a folder kvshift wrote"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(dir / "s.json"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  // An earlier output folder that now holds the scenario being run: refused too.
  const fs::path out = dir / "out";
  ASSERT_EQ(
      run_kvshift("run " + (dir / "s.json").string() + " --quiet --out " + out.string()).exit_code,
      0);
  fs::copy(dir / "s.json", out / "s.json");
  r = run_kvshift("run " + (out / "s.json").string() + " --quiet --force --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds the input"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out / "s.json"));
  // A plain earlier output folder is still replaced whole.
  fs::remove(out / "s.json");
  r = run_kvshift("run " + (dir / "s.json").string() + " --quiet --force --out " + out.string() +
                  "/");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  for (const auto& e : fs::directory_iterator(out)) {  // "out/" staged beside out, not inside
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  }
  fs::remove_all(dir);
}

TEST(RunCli, AnEmptyOutIsRefusedNotTheDefault) {
  const auto r = run_kvshift("run --quiet --out ''");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: must name a folder"), std::string::npos) << r.err;
}

TEST(RunCli, RunsInOneSecondGetADefaultFolderEach) {
  const fs::path dir = scratch("default");
  write_short_quickstart(dir / "s.json", "2s");
  const std::string one = kvshift_exe() + " run s.json --quiet";
  // Two in a row, then three side by side: five folders, none replaced.
  const auto a = run_command("cd " + dir.string() + " && " + one + " && " + one + " && (" + one +
                             " & " + one + " & " + one + " & wait)");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::size_t folders = 0;
  for (const auto& e : fs::directory_iterator(dir / "kvshift-out")) {
    folders += e.is_directory() && fs::exists(e.path() / "summary.json");
  }
  EXPECT_EQ(folders, 5u) << a.out;
  fs::remove_all(dir);
}

TEST(RunCli, AnInterruptedRunRemovesItsStagingFolder) {
  const fs::path dir = scratch("interrupt");
  // A year at a low rate: long enough to be interrupted after a second.
  write_short_quickstart(dir / "s.json", "8760h",
                         R"({"files": ["summary", "requests"], "link_sample_interval": "600s"})",
                         0.001);
  for (const auto& [sig, code] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    const auto r = run_command("timeout --preserve-status -s " + sig + " 1.5 " + kvshift_exe() +
                               " run " + (dir / "s.json").string() + " --quiet --out " +
                               (dir / "o").string() + " 2>&1; echo rc=$?");
    EXPECT_NE(r.out.find("rc=" + std::to_string(code)), std::string::npos) << sig << r.out;
    EXPECT_NE(r.out.find("interrupted (SIG" + sig + "); removed the unfinished"), std::string::npos)
        << r.out;
    for (const auto& e : fs::directory_iterator(dir)) {
      EXPECT_NE(e.path().filename().string().rfind("o", 0), 0u) << "left behind: " << e.path();
    }
  }
  fs::remove_all(dir);
}

TEST(RunCli, ARunWithoutSummaryWritesItsFilesAndNoPage) {
  const fs::path dir = scratch("nosummary");
  write_short_quickstart(dir / "s.json", "2s", R"({"files": ["requests"]})");
  const auto r =
      run_kvshift("run " + (dir / "s.json").string() + " --quiet --out " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "o" / "requests.csv"));
  EXPECT_FALSE(fs::exists(dir / "o" / "report.html"));
  fs::remove_all(dir);
}

/// Replaces every `from` in `text` with `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

TEST(RunCli, ProfiledCostsSayWhenAShapeIsExtrapolatedOrTheWeightsChanged) {
  // The shipped profiled drain, one request whose decode outgrows the table's largest measured
  // context (4,096 tokens), on a copy of the table whose recorded model folder is another one.
  const fs::path dir = scratch("profiled");
  fs::create_directories(dir);
  const std::string src = KVSHIFT_SOURCE_DIR;
  std::ofstream(dir / "trace.csv") << "arrival_s,prompt_tokens,output_tokens\n0,4000,600\n";
  nlohmann::json table = nlohmann::json::parse(slurp(src + "/results/costs/smollm2-135m-cpu.json"));
  table["inputs"]["model"]["path"] = src + "/tests/fixtures/tiny_llama";
  std::ofstream(dir / "table.json") << table.dump(2);
  std::string text = slurp(src + "/scenarios/regression/drain-profiled-smollm2-1gbps.json");
  text = replace_all(text, "\"../schema.json\"", "\"schema.json\"");
  text = replace_all(text, "profile:../../results/costs/smollm2-135m-cpu.json",
                     "profile:" + (dir / "table.json").string());
  text = replace_all(text, "../traces/one-request-512-long.csv", (dir / "trace.csv").string());
  text = replace_all(text, "\"../models/", "\"" + src + "/scenarios/models/");
  text = replace_all(text, "../../", src + "/");
  std::ofstream(dir / "s.json") << text;
  const auto r = run_kvshift("run " + (dir / "s.json").string() + " --out " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = nlohmann::json::parse(slurp((dir / "o/summary.json").string()));
  const std::string decode = summary["cost_sources"]["decode"]["source"];
  EXPECT_NE(decode.find("decode at 4,"), std::string::npos) << decode;
  EXPECT_NE(decode.find("past the largest measured (4,096)"), std::string::npos) << decode;
  EXPECT_NE(decode.find("warning: measured on weights fnv1a64:d592ec016116dd0e"), std::string::npos)
      << decode;
  EXPECT_NE(r.out.find("past the largest measured (4,096)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshift::testing
