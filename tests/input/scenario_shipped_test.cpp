// Every shipped scenario loads cleanly, and the values that matter come out
// of the loader as the files say (units converted, generators expanded).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "input/scenario_loader.hpp"
#include "tests/input/scenario_test_util.hpp"

namespace kvshift::input {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios";

std::vector<std::string> shipped_files() {
  std::vector<std::string> files;
  const std::string bench = std::string(KVSHIFT_SOURCE_DIR) + "/bench/scenarios";
  for (const auto& folder : {kDir, kDir + "/regression", bench}) {
    for (const auto& e : fs::directory_iterator(folder)) {
      if (e.path().extension() == ".json" && e.path().filename() != "schema.json") {
        files.push_back(e.path().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

int count_kind(const input::ScenarioSpec& s, sim::NodeKind k) {
  return static_cast<int>(std::count_if(s.cluster.nodes.begin(), s.cluster.nodes.end(),
                                        [&](const auto& n) { return n.kind == k; }));
}

const sim::ClusterLink* link(const input::ScenarioSpec& s, const std::string& name) {
  for (const auto& l : s.cluster.links) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

TEST(ShippedScenarios, EveryFileLoadsWithoutProblems) {
  const auto files = shipped_files();
  ASSERT_GE(files.size(), 10u);
  for (const auto& f : files) {
    const ScenarioLoad load = try_load_scenario_file(f);
    EXPECT_TRUE(load.spec.has_value()) << f << ":\n"
                                       << (load.problems.empty() ? "" : load.problems[0]);
  }
}

TEST(ShippedScenarios, PdDisaggregatedHasItsPoolsAndEngine) {
  const input::ScenarioSpec s = load_scenario_file(kDir + "/pd-disaggregated.json");
  ASSERT_EQ(s.pools.size(), 2u);
  EXPECT_TRUE(sim::disaggregated(s));
  int prefill = 0, decode = 0;
  for (const sim::ClusterNode& n : s.cluster.nodes) {
    if (n.kind != sim::NodeKind::kGpu) continue;
    (s.pools[n.pool].role == sim::PoolRole::kPrefill ? prefill : decode) += n.gpu_count;
    if (s.pools[n.pool].role == sim::PoolRole::kPrefill) {
      EXPECT_EQ(n.hbm_per_gpu, s.pools[n.pool].gpu->hbm_capacity)
          << "the pool's GPU brings its HBM";
    }
  }
  EXPECT_EQ(prefill, 8);
  EXPECT_EQ(decode, 24);
  EXPECT_EQ(s.transfer_engine.max_inflight_per_destination, 4);
  EXPECT_EQ(s.workload.trace.size(), 720u);
}

TEST(ShippedScenarios, TheIssueNamesAreAllThere) {
  for (const char* name : {"quickstart", "paper-local-recovery", "wan-migration",
                           "leafspine-failover", "predictor-sharing"}) {
    EXPECT_TRUE(fs::exists(kDir + "/" + name + ".json")) << name;
  }
}

TEST(ShippedScenarios, EmbeddedQuickstartIsTheFile) {
  std::ifstream in(kDir + "/quickstart.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), std::string(embedded_quickstart_text()));
  const input::ScenarioSpec s = load_embedded_quickstart();
  EXPECT_EQ(s.name, "quickstart");
  EXPECT_EQ(s.policies.strategies.size(), 6u) << "quickstart shows every strategy";
}

TEST(ShippedScenarios, QuickstartValuesAreConvertedOnce) {
  const input::ScenarioSpec s = load_embedded_quickstart();
  EXPECT_EQ(s.model.name, "qwen2.5-1.5b");
  EXPECT_EQ(s.gpu.name, "h100");
  EXPECT_EQ(s.cluster.generator, sim::ClusterGenerator::kStar);
  EXPECT_EQ(count_kind(s, sim::NodeKind::kGpu), 4);
  ASSERT_NE(link(s, "gpu2-hub"), nullptr);
  EXPECT_EQ(link(s, "gpu2-hub")->bandwidth.value, 10e9);
  EXPECT_EQ(link(s, "gpu2-hub")->latency, sim::microseconds(20));
  EXPECT_EQ(s.cluster.nodes[1].host_memory, Bytes{256LL << 30});
  EXPECT_EQ(s.cluster.nodes[1].hbm_per_gpu, s.gpu.hbm_capacity);
  EXPECT_EQ(s.workload.arrival, sim::ArrivalKind::kPoisson);
  EXPECT_EQ(s.workload.rate_per_s, 16.0);
  EXPECT_EQ(s.workload.prompt_tokens.kind, sim::TokenDistKind::kLognormal);
  EXPECT_EQ(s.workload.output_tokens.min, 128);
  EXPECT_EQ(s.workload.output_tokens.max, 1024);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events[0].kind, sim::EventKind::kNodeFailure);
  EXPECT_DOUBLE_EQ(s.events[0].detection_delay.value, 0.5);
  EXPECT_DOUBLE_EQ(s.events[0].repair_after->value, 30.0);
  EXPECT_EQ(s.events[1].bandwidth->value, 1e9);
  ASSERT_TRUE(s.risk_kv.has_value());
  EXPECT_EQ(s.risk_kv->omission.describe(), "G2,G3,G5,G6");
  ASSERT_TRUE(s.proxy_kv.has_value());
  EXPECT_EQ(s.proxy_kv->proxy_model.name, "qwen2.5-0.5b");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_DOUBLE_EQ(s.duration.value, 60.0);
  EXPECT_DOUBLE_EQ(s.slo.ttft->value, 0.5);
}

TEST(ShippedScenarios, LeafSpineHas64GpuNodesAndDerivedUplinks) {
  const input::ScenarioSpec s = load_scenario_file(kDir + "/leafspine-failover.json");
  EXPECT_EQ(count_kind(s, sim::NodeKind::kGpu), 64);
  EXPECT_EQ(count_kind(s, sim::NodeKind::kSwitch), 8 + 4);
  EXPECT_EQ(s.cluster.links.size(), 64u + 8u * 4u);
  // uplink = nodes_per_leaf · node_bandwidth / (spines · oversubscription) = 8·400G / (4·2).
  ASSERT_NE(link(s, "leaf7-spine3"), nullptr);
  EXPECT_DOUBLE_EQ(link(s, "leaf7-spine3")->bandwidth.value, 400e9);
  ASSERT_NE(link(s, "gpu63-leaf7"), nullptr);
  EXPECT_EQ(std::count_if(s.events.begin(), s.events.end(),
                          [](const auto& e) { return e.kind == sim::EventKind::kNodeFailure; }),
            2);
  EXPECT_EQ(s.cluster.nodes.back().gpu_count, 8);
}

TEST(ShippedScenarios, WanMigrationCrossesA100MbpsWan) {
  const input::ScenarioSpec s = load_scenario_file(kDir + "/wan-migration.json");
  const sim::ClusterLink* wan = link(s, "east/gw-west/gw");
  ASSERT_NE(wan, nullptr);
  EXPECT_EQ(wan->bandwidth.value, 100e6);
  EXPECT_EQ(wan->latency, sim::milliseconds(20));
  EXPECT_EQ(count_kind(s, sim::NodeKind::kStorage), 1);
  EXPECT_EQ(s.predictors.placement, sim::PredictorPlacement::kOnDemand);
  EXPECT_EQ(*s.predictors.hbm_budget, Bytes{64LL << 20});
  EXPECT_EQ(s.workload.arrival, sim::ArrivalKind::kGamma);
  EXPECT_EQ(s.workload.cv, 2.0);
}

TEST(ShippedScenarios, PaperLocalRecoveryHasThreeModelsAtBatchOne) {
  for (const char* model : {"qwen2.5-0.5b", "qwen2.5-1.5b", "tinyllama-1.1b"}) {
    const std::string f = std::string(model) == "qwen2.5-0.5b"
                              ? kDir + "/paper-local-recovery.json"
                              : kDir + "/paper-local-recovery-" + model + ".json";
    const input::ScenarioSpec s = load_scenario_file(f);
    EXPECT_EQ(s.model.name, model);
    EXPECT_EQ(s.serving.max_batch, 1);
    ASSERT_EQ(s.workload.trace.size(), 1u);
    EXPECT_EQ(s.workload.trace[0].prompt_tokens, 512);
    EXPECT_EQ(s.policies.strategies,
              (std::vector<sim::Strategy>{sim::Strategy::kTokenReplay, sim::Strategy::kRiskKv}));
    EXPECT_FALSE(s.risk_kv->omission.empty());
  }
}

TEST(ShippedScenarios, SmolLM2UsesTheCommittedCalibration) {
  // The omission plan and ΔNLL both come from the topology.json `kvshift calibrate` wrote.
  const std::string calibrated =
      std::string(KVSHIFT_SOURCE_DIR) + "/results/calibration/smollm2-135m/topology.json";
  std::ifstream in(calibrated);
  const nlohmann::json file = nlohmann::json::parse(in);
  const input::ScenarioSpec s = load_scenario_file(kDir + "/smollm2-calibrated.json");
  EXPECT_EQ(s.model.name, "smollm2-135m");
  ASSERT_TRUE(s.risk_kv);
  EXPECT_EQ(s.risk_kv->topology_source, fs::path(calibrated).lexically_normal().string());
  std::vector<int> groups;
  for (const auto& g : s.risk_kv->omission.groups()) groups.push_back(g.group);
  EXPECT_EQ(groups, file["omitted_groups"].get<std::vector<int>>());
  EXPECT_EQ(s.risk_kv->delta_nll, file["quality"]["delta_nll_mean"].get<double>());
}

TEST(ShippedScenarios, SmolLM2ProxyKvChargesTheCommittedMeasurement) {
  // ProxyKV's ΔNLL at ρ 0.5 is the one `kvshift quality` wrote for the best committed mapper
  // (the one trained on continuation labels, rows labelled proxykv), measured at 512, 1,024
  // and 2,048 history tokens: each move pays the one of its context.
  const std::string dir =
      std::string(KVSHIFT_SOURCE_DIR) + "/results/proxykv/smollm2-135m-continuation/";
  auto measured = [&](const std::string& file) {
    std::ifstream in(dir + file);
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& row : doc["rows"]) {
      if (row["method"] == "proxykv" && row["label"] == "proxykv" && row["retention"] == 0.5) {
        return row["delta_nll_mean"].get<double>();
      }
    }
    return -1.0;
  };
  const input::ScenarioSpec s = load_scenario_file(kDir + "/smollm2-proxykv.json");
  ASSERT_TRUE(s.proxy_kv);
  EXPECT_EQ(s.proxy_kv->retention, 0.5);
  EXPECT_EQ(s.proxy_kv->proxy_model.layers, 8);
  ASSERT_EQ(s.proxy_kv->delta_nll_by_context.size(), 3u);
  const std::pair<std::int64_t, std::string> files[] = {
      {512, "quality-kjv-h512.json"}, {1024, "quality-kjv.json"}, {2048, "quality-kjv-h2048.json"}};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.proxy_kv->delta_nll_by_context[i].context, files[i].first);
    EXPECT_EQ(s.proxy_kv->delta_nll_by_context[i].delta_nll, measured(files[i].second))
        << files[i].second;
  }
  EXPECT_EQ(s.proxy_kv->delta_nll, measured("quality-kjv-h512.json"));
  EXPECT_NE(s.proxy_kv->delta_nll_source.find("quality-kjv-h512.json (fnv1a64:"), std::string::npos)
      << s.proxy_kv->delta_nll_source;
  EXPECT_NE(
      s.proxy_kv->delta_nll_source.find(
          "): proxykv (prune:proxykv:results/proxykv/smollm2-135m-continuation/mapper.safetensors) "
          "measured at ρ 0.5"),
      std::string::npos)
      << s.proxy_kv->delta_nll_source;
  EXPECT_NE(s.proxy_kv->delta_nll_source.find("measured at 512, 1024, 2048 history tokens"),
            std::string::npos)
      << s.proxy_kv->delta_nll_source;
}

TEST(ShippedScenarios, TracePathsResolveAgainstTheScenarioFolder) {
  const input::ScenarioSpec s = load_scenario_file(kDir + "/regression/drain-full-kv-100mbps.json");
  EXPECT_EQ(s.workload.trace_path,
            fs::path(kDir + "/traces/one-request-512.csv").lexically_normal().string());
  EXPECT_EQ(s.workload.trace.size(), 1u);
}

}  // namespace
}  // namespace kvshift::input
