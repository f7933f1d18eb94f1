// `kvshift validate`: "FILE: ok (summary)" on stdout for good files, every
// problem as "FILE: /pointer: message" on stderr for bad ones; exit 0 or 2;
// nothing is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

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
  const auto folder = run_kvshift("validate " + kScenarios);
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_EQ(folder.err, kScenarios + ": /: is a folder, not a scenario file\n");
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

/// The quickstart with `change` applied, written to the temp folder as `name`; its path.
std::string quickstart_with(const std::string& name,
                            const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = nlohmann::json::parse(slurp(kScenarios + "/quickstart.json"));
  change(j);
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path) << j.dump(2);
  return path;
}

TEST(ValidateCli, ANameThatIsNotOneFolderNameIsRefused) {
  for (const std::string& name : {std::string("../../pwned"), std::string("a/b"), std::string(""),
                                  std::string("a\nb"), std::string("..")}) {
    const std::string f = quickstart_with("name.json", [&](auto& j) { j["name"] = name; });
    const auto r = run_kvshift("validate " + f);
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_NE(r.err.find(f + ": /name: must not"), std::string::npos) << r.err;
  }
}

TEST(ValidateCli, AnEmptyFilesListIsRefusedBeforeSimulating) {
  const std::string f = quickstart_with(
      "files.json", [](auto& j) { j["outputs"]["files"] = nlohmann::json::array(); });
  const auto r = run_kvshift("validate " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/outputs/files: must name at least one file"), std::string::npos) << r.err;
}

TEST(ValidateCli, RunsTooLargeForMemoryAreRefusedWithTheEstimate) {
  const std::string rate =
      quickstart_with("rate.json", [](auto& j) { j["workload"]["rate"] = 1e9; });
  auto r = run_kvshift("validate " + rate);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/workload/rate: 1e+09 requests/s over 60 s is about 6e+10 arrivals"),
            std::string::npos)
      << r.err;
  const std::string flood =
      quickstart_with("flood.json", [](auto& j) { j["workload"]["rate"] = 20000; });
  r = run_kvshift("validate " + flood);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/workload/rate: 5e+03 requests/s per GPU (4 GPUs) is far beyond what a "
                       "GPU serves: nearly all of the about 1,200,000 arrivals would wait"),
            std::string::npos)
      << r.err;
  const std::string samples = quickstart_with(
      "samples.json", [](auto& j) { j["outputs"]["link_sample_interval"] = "1us"; });
  r = run_kvshift("validate " + samples);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/outputs/link_sample_interval: a sample every 1e-06 s over the run is up "
                       "to 480,000,000 link samples (60,000,000 instants x 8 link directions)"),
            std::string::npos)
      << r.err;
}

TEST(ValidateCli, PromptsLongerThanTheModelsContextAreRefused) {
  const std::string f = quickstart_with("context.json", [](auto& j) {
    j["workload"]["prompt_tokens"] = {{"distribution", "fixed"}, {"value", 40000}};
  });
  auto r = run_kvshift("validate " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/workload/prompt_tokens: prompts of up to 40000 tokens do not fit "
                       "qwen2.5-1.5b's context of 32768 tokens"),
            std::string::npos)
      << r.err;
  // Prompt and output together past the context: accepted, with a note.
  const std::string g = quickstart_with("context2.json", [](auto& j) {
    j["workload"]["prompt_tokens"] = {{"distribution", "fixed"}, {"value", 32000}};
    j["workload"]["output_tokens"] = {{"distribution", "fixed"}, {"value", 1000}};
  });
  r = run_kvshift("validate " + g);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: /workload/output_tokens: prompts of up to 32000 tokens plus up to "
                       "1000 generated tokens go beyond qwen2.5-1.5b's context"),
            std::string::npos)
      << r.out;
}

TEST(ValidateCli, ATopologyMadeForAnotherModelIsRefusedNamingTheField) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/topology.json")
      << R"({"model": {"name": "qwen2.5-7b", "layers": 28}, "group_width": 2,
             "omitted_groups": [3]})";
  const std::string f = quickstart_with("topo.json", [&](auto& j) {
    j["risk_kv"] = {{"topology", dir + "/topology.json"}, {"delta_nll", 0.03}};
  });
  const auto r = run_kvshift("validate " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/model/name: topology was made for qwen2.5-7b, not qwen2.5-1.5b"),
            std::string::npos)
      << r.err;
}

TEST(ValidateCli, TraceRequestsAfterTheDurationAreNoted) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/late.csv")
      << "arrival_s,prompt_tokens,output_tokens\n0,100,10\n1000000000000,100,10\n";
  const std::string f = quickstart_with("late.json", [&](auto& j) {
    j["workload"] = {{"arrival", "trace"}, {"trace", dir + "/late.csv"}};
  });
  const auto r = run_kvshift("validate " + f);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: /workload/trace: 1 of 2 requests arrive after the 60 s the "
                       "scenario lasts and are never simulated"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace kvshift::testing
