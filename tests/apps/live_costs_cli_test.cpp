// `"cost_source": "live"` as a user drives it: a scenario runs every op on the
// real weights its "live" section names (the model folder, the trained mapper
// and its proxy), summary.json and the printed table say per op where its time
// came from and how many shapes were measured; a missing input, a mapper that
// does not fit and "cuda" without a GPU are input errors (exit 2) naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/testing/model_folder.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A 5-layer, 1-KV-head model folder (the parity mapper's target), a 3-layer config (its proxy)
/// and a two-node scenario whose drain migrates requests with ProxyKV, costs measured live.
struct LiveScenario {
  fs::path dir = fs::path(KVSHIFT_BINARY_DIR) / ("live-cli-" + std::to_string(::getpid()));
  json scenario;
  LiveScenario() {
    fs::remove_all(dir);
    write_llama_folder(dir / "model", {.hidden = 16, .layers = 5, .heads = 2, .kv_heads = 1});
    json proxy = json::parse(std::ifstream(dir / "model/config.json"));
    proxy["num_hidden_layers"] = 3;
    fs::create_directories(dir / "proxy");
    std::ofstream(dir / "proxy/config.json") << proxy.dump();
    const fs::path mapper = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/mapper_parity";
    scenario = {
        {"name", "live"},
        {"model", (dir / "model").string()},
        {"gpu", "h200"},
        {"cluster", {{"star", {{"nodes", 2}, {"bandwidth", "10Gbps"}, {"latency", "10us"}}}}},
        {"workload",
         {{"arrival", "poisson"},
          {"rate", 20},
          {"max_requests", 12},
          {"prompt_tokens", {{"distribution", "uniform"}, {"min", 20}, {"max", 100}}},
          {"output_tokens", {{"distribution", "fixed"}, {"value", 40}}}}},
        {"events", {{{"type", "drain"}, {"at", "200ms"}, {"node", "gpu0"}}}},
        {"policies", {{"strategies", {"full_kv", "proxy_kv"}}}},
        {"proxy_kv",
         {{"proxy_model", (dir / "proxy/config.json").string()},
          {"retention", 0.5},
          {"delta_nll", 0.01}}},
        {"cost_source", "live"},
        {"live",
         {{"model", (dir / "model").string()},
          {"proxy_layers", 3},
          {"mapper", (mapper / "mapper.safetensors").string()},
          {"repeats", 3}}},
        {"duration", "2s"},
        {"seed", 3}};
  }
  ~LiveScenario() { fs::remove_all(dir); }
  std::string write(const json& s) const {
    const fs::path p = dir / "scenario.json";
    std::ofstream(p) << s.dump(2);
    return p.string();
  }
};

TEST(LiveCostsCli, EveryOpRunsTheRealWeightsAndTheSummarySaysWhereEachTimeCameFrom) {
  const LiveScenario s;
  const fs::path out = s.dir / "out";
  const auto r = run_kvshift("run " + s.write(s.scenario) + " --no-trace --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU durations:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shapes measured"), std::string::npos) << r.out;
  const json summary = json::parse(std::ifstream(out / "summary.json"));
  const json& c = summary["cost_sources"];
  for (const char* op : {"prefill", "decode", "proxy_score", "prune"}) {
    ASSERT_TRUE(c.contains(op)) << op;
    EXPECT_NE(c[op]["source"].get<std::string>().find("live (cpu: "), std::string::npos) << op;
    EXPECT_NE(
        c[op]["source"].get<std::string>().find("real weights of " + (s.dir / "model").string()),
        std::string::npos)
        << op;
    EXPECT_GT(c[op].value("live_measurements", 0), 0) << op << ": " << c[op].dump();
    EXPECT_GE(c[op]["spread"].get<double>(), 0.0) << op;
  }
  EXPECT_NE(c["proxy_score"]["source"].get<std::string>().find("mapper"), std::string::npos);
  EXPECT_EQ(c["reconstruct"].value("live_measurements", 0), 0);  // no RISK-KV here
  EXPECT_GT(summary["strategies"]["proxy_kv"]["gpu_time_s"]["proxy_scoring"].get<double>(), 0.0);
  // Every shape measured, as a cost table: the same run again from it is deterministic.
  const json table = json::parse(std::ifstream(out / "live-costs.json"));
  EXPECT_EQ(table["inputs"]["weights"], "real");
  EXPECT_EQ(
      table["inputs"]["mapper"]["path"],
      (fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/mapper_parity/mapper.safetensors").string());
  int measured = 0;
  for (const char* op : {"prefill", "decode", "proxy_score", "prune"}) {
    measured += c[op]["live_measurements"].get<int>();
  }
  EXPECT_EQ(table["entries"].size(), static_cast<std::size_t>(measured));
  json replay = s.scenario;
  replay.erase("live");
  replay["cost_source"] = "profile:" + (out / "live-costs.json").string();
  const auto again = run_kvshift("run " + s.write(replay) + " --quiet --no-trace --out " +
                                 (s.dir / "replay").string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
}

/// Shapes measured, over every op, by the run whose summary.json is at `path`.
int measured_shapes(const fs::path& path) {
  const json summary = json::parse(std::ifstream(path));
  int n = 0;
  for (const auto& [op, c] : summary["cost_sources"].items()) n += c.value("live_measurements", 0);
  return n;
}

TEST(LiveCostsCli, TheMeasurementsOfASweepAreSharedByItsPoints) {
  // Point 1's prompts are shorter than point 0's: alone it measures fewer shapes, but in the
  // sweep it reuses point 0's live source, whose count it reports (nothing is measured twice).
  const LiveScenario s;
  const fs::path out = s.dir / "sweep";
  const auto r = run_kvshift("sweep " + s.write(s.scenario) +
                             " --set /workload/prompt_tokens/max=100,30 --jobs 1 --quiet --out " +
                             out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int first = measured_shapes(out / "points/0/summary.json");
  EXPECT_GT(first, 0);
  EXPECT_EQ(measured_shapes(out / "points/1/summary.json"), first);
  json alone = s.scenario;
  alone["workload"]["prompt_tokens"]["max"] = 30;
  const auto single = run_kvshift("run " + s.write(alone) + " --quiet --no-trace --out " +
                                  (s.dir / "alone").string());
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_LT(measured_shapes(s.dir / "alone/summary.json"), first);
}

TEST(LiveCostsCli, MissingOrWrongInputsAndCudaWithoutAGpuAreInputErrors) {
  const LiveScenario s;
  const fs::path out = s.dir / "bad";
  auto expect_refused = [&](json scenario, const std::string& needle) {
    const auto r = run_kvshift("run " + s.write(scenario) + " --quiet --out " + out.string());
    EXPECT_EQ(r.exit_code, 2) << needle << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  };
  json no_live = s.scenario;
  no_live.erase("live");
  expect_refused(no_live, "/live: required with cost_source \"live\"");
  json no_mapper = s.scenario;
  no_mapper["live"].erase("mapper");
  expect_refused(no_mapper, "needs \"mapper\"");
  json other_model = s.scenario;
  other_model["model"] = (s.dir / "proxy/config.json").string();
  other_model["proxy_kv"]["proxy_model"] = (s.dir / "proxy/config.json").string();
  expect_refused(other_model, "/live/model");
  json bad_proxy = s.scenario;
  bad_proxy["live"]["proxy_layers"] = 2;  // 4 proxy channels: the mapper reads 6
  expect_refused(bad_proxy, "/live/mapper");
  json analytic = s.scenario;
  analytic["cost_source"] = "analytic";
  expect_refused(analytic, "/live: applies only to cost_source \"live\"");
  json cuda = s.scenario;
  cuda["live"]["backend"] = "cuda";
  const auto r = run_kvshift("run " + s.write(cuda) + " --quiet --out " + out.string());
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/live/backend: \"cuda\" cannot run here"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvshift::testing
