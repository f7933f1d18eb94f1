// `kvshift validate`: "FILE: ok (summary)" on stdout for good files, every
// problem as "FILE: /pointer: message" on stderr for bad ones; exit 0 or 2;
// nothing is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;
const std::string kScenarios = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios";

std::string temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("kvshift-validate-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

TEST(ValidateCli, ShippedScenariosAreOk) {
  const auto r = run_kvshift("validate " + kScenarios + "/quickstart.json " + kScenarios +
                             "/leafspine-failover.json --embedded");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("<embedded quickstart.json>: ok (quickstart: qwen2.5-1.5b on h100, 4 GPU "
                       "nodes (4 GPUs), 4 links, poisson 16 req/s, 3 events"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(kScenarios + "/leafspine-failover.json: ok (leafspine-failover: "
                                    "llama-3.1-8b on h200, 64 GPU nodes (512 GPUs)"),
            std::string::npos)
      << r.out;
}

TEST(ValidateCli, EveryProblemOfEveryFileIsListedAndExitIs2) {
  const std::string dir = temp_dir();
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << R"({"model": "qwen2.5-0.5b", "gpu": "h100", "duraton": "1s",
    "cluster": {"nodes": [{"name": "a"}], "links": []},
    "workload": {"arrival": "poisson", "rate": 0, "prompt_tokens": 8, "output_tokens": 8}})";
  const auto before = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  const auto r = run_kvshift("validate " + kScenarios + "/quickstart.json " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("quickstart.json: ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, bad + ": /duraton: unknown key \"duraton\" (did you mean \"duration\"?)\n" +
                       bad + ": /workload/rate: must be > 0 (got 0)\n" + bad +
                       ": /duration: is required\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), before)
      << "validate must not write files";
  fs::remove_all(dir);
}

TEST(ValidateCli, MissingFileAndBadJsonAreInputErrors) {
  const auto r = run_kvshift("validate /nonexistent/s.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "/nonexistent/s.json: /: cannot open file\n");
  const std::string dir = temp_dir();
  std::ofstream(dir + "/t.json") << "{\"model\": ";
  const auto j = run_kvshift("validate " + dir + "/t.json");
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_EQ(j.err.rfind(dir + "/t.json: /: not valid JSON at byte 11: ", 0), 0u) << j.err;
  fs::remove_all(dir);
}

TEST(ValidateCli, NoFileIsAUsageError) {
  const auto r = run_kvshift("validate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give one or more scenario files"), std::string::npos) << r.err;
}

TEST(ValidateCli, QuietPrintsOnlyProblems) {
  const auto r = run_kvshift("validate -q " + kScenarios + "/wan-migration.json");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace kvshift::testing
