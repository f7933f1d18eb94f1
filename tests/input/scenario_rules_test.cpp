// Pass one of the loader, one test per rule: each asserts the exact JSON
// pointer and message, and that every problem in a file is reported at once.
#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "tests/input/scenario_test_util.hpp"

namespace kvshift::input {
namespace {

using testing::json;
using testing::minimal_json;
using testing::problems;
using testing::quickstart_json;
using V = std::vector<std::string>;

TEST(ScenarioRules, MinimalScenarioLoadsWithDefaults) {
  const input::ScenarioSpec s = testing::load(minimal_json());
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.protection.mode, sim::ProtectionMode::kNone);
  EXPECT_EQ(s.policies.strategies,
            (std::vector<sim::Strategy>{sim::Strategy::kFullKv, sim::Strategy::kTokenReplay}));
  EXPECT_EQ(s.cost_source.kind, input::CostSourceKind::kAnalytic);
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.serving.max_batch, 32);
  EXPECT_EQ(s.cluster.links[0].name, "a-b");
  EXPECT_EQ(s.cluster.nodes[0].gpu_count, 1);
}

TEST(ScenarioRules, TopLevelMustBeAnObject) {
  EXPECT_EQ(problems(json::array()), V{"/: expected a JSON object (got array)"});
}

TEST(ScenarioRules, SyntaxErrorNamesTheByte) {
  const auto load = try_load_scenario_text("{\"model\": }", "t.json");
  ASSERT_EQ(load.problems.size(), 1u);
  EXPECT_EQ(load.problems[0].rfind("/: not valid JSON at byte 11: ", 0), 0u) << load.problems[0];
}

TEST(ScenarioRules, ARepeatedKeyIsNamedByItsPointer) {
  std::string text = minimal_json().dump();
  text.insert(1, R"("seed": 42, "seed": 43, "events": [{"type": "drain", "at": "1s", )"
                 R"("at": "2s", "node": "a"}], )");
  const auto load = try_load_scenario_text(text, "t.json");
  ASSERT_GE(load.problems.size(), 2u);
  EXPECT_EQ(load.problems[0],
            "/seed: duplicate key \"seed\" (JSON keeps only the last one; write it once)");
  EXPECT_EQ(load.problems[1],
            "/events/0/at: duplicate key \"at\" (JSON keeps only the last one; write it once)");
}

TEST(ScenarioRules, NumberTooLargeForADoubleIsAnInputProblem) {
  // Found by the fuzzer: nlohmann reports this as out_of_range, not parse_error.
  const auto load = try_load_scenario_text("{\"seed\": 1e309}", "t.json");
  ASSERT_EQ(load.problems.size(), 1u);
  EXPECT_EQ(load.problems[0].rfind("/: not valid JSON: ", 0), 0u) << load.problems[0];
  EXPECT_NE(load.problems[0].find("1e309"), std::string::npos) << load.problems[0];
}

TEST(ScenarioRules, HugeIntegralFloatsAreRangeErrors) {
  // Found by the fuzzer: 1e52 must be reported, not cast to an integer.
  json j = minimal_json();
  j["seed"] = 1e52;
  j["serving"] = {{"max_batch", -1e300}};
  EXPECT_EQ(problems(j), (V{"/serving/max_batch: must be in [1, 65536] (got -1e+300)",
                            "/seed: must be in [0, 9223372036854775807] (got 1e+52)"}));
  j = minimal_json();
  j["risk_kv"] = {{"topology", {{"omitted_groups", {2, 1e30}}}}, {"delta_nll", 0.1}};
  EXPECT_EQ(problems(j), V{"/risk_kv/topology: /omitted_groups/1: number out of range"});
}

TEST(ScenarioRules, RequiredSectionsAreNamed) {
  EXPECT_EQ(problems(json::object()),
            (V{"/model: is required", "/gpu: is required", "/cluster: is required",
               "/workload: is required", "/duration: is required"}));
}

TEST(ScenarioRules, UnknownTopLevelKeySuggestsTheKnownOne) {
  json j = minimal_json();
  j["sedd"] = 3;
  EXPECT_EQ(problems(j), V{"/sedd: unknown key \"sedd\" (did you mean \"seed\"?)"});
}

TEST(ScenarioRules, UnknownNestedKeyHasItsFullPointer) {
  json j = minimal_json();
  j["cluster"]["links"][0]["bandwith"] = "1Gbps";
  EXPECT_EQ(problems(j),
            V{"/cluster/links/0/bandwith: unknown key \"bandwith\" (did you mean \"bandwidth\"?)"});
}

TEST(ScenarioRules, UnitErrorsNameTheValueAndTheExpectedForm) {
  json j = minimal_json();
  j["cluster"]["links"][0]["bandwidth"] = "100 MBit";
  j["duration"] = 10;
  const V p = problems(j);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].rfind("/cluster/links/0/bandwidth: ", 0), 0u) << p[0];
  EXPECT_NE(p[0].find("\"100 MBit\""), std::string::npos) << p[0];
  EXPECT_EQ(p[1], "/duration: expected a unit string (got 10)");
}

TEST(ScenarioRules, ZeroBandwidthIsRejected) {
  json j = minimal_json();
  j["cluster"]["links"][0]["bandwidth"] = "0Gbps";
  EXPECT_EQ(problems(j), V{"/cluster/links/0/bandwidth: must be > 0 (got \"0Gbps\")"});
}

TEST(ScenarioRules, ZeroDurationIsRejected) {
  json j = minimal_json();
  j["duration"] = "0s";
  EXPECT_EQ(problems(j), V{"/duration: must be > 0 (got \"0s\")"});
}

TEST(ScenarioRules, UnknownModelListsTheKnownOnes) {
  json j = minimal_json();
  j["model"] = "qwen9";
  const V p = problems(j);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("/model: unknown model \"qwen9\" (known: qwen2.5-0.5b, ", 0), 0u) << p[0];
}

TEST(ScenarioRules, ModelObjectOverridesABase) {
  json j = minimal_json();
  j["model"] = {{"base", "qwen2.5-0.5b"}, {"name", "qwen-long"}, {"kv_dtype", "fp32"}};
  const input::ScenarioSpec s = testing::load(j);
  EXPECT_EQ(s.model.name, "qwen-long");
  EXPECT_EQ(s.model.layers, 24);
  EXPECT_EQ(s.model.kv_dtype, cost_model::DType::kF32);
  j["model"]["kv_dtype"] = "int4";
  EXPECT_EQ(problems(j), V{"/model/kv_dtype: expected one of fp32, fp16, bf16 (got \"int4\")"});
}

TEST(ScenarioRules, ModelObjectWithoutBaseNeedsItsShape) {
  json j = minimal_json();
  j["model"] = {{"name", "m"}, {"layers", 4}};
  const V p = problems(j);
  EXPECT_EQ(p.front(), "/model/hidden: is required");
}

TEST(ScenarioRules, GpuPresetWithOverrides) {
  json j = minimal_json();
  j["gpu"] = {{"base", "h100"}, {"hbm_capacity", "40GiB"}};
  EXPECT_EQ(testing::load(j).gpu.hbm_capacity, Bytes{40LL << 30});
  j["gpu"] = {{"base", "h1000"}};
  const V p = problems(j);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("/gpu/base: ", 0), 0u) << p[0];
}

TEST(ScenarioRules, EnumValuesListTheChoicesAndSuggestOne) {
  json j = minimal_json();
  j["workload"]["arrival"] = "poison";
  EXPECT_EQ(problems(j), V{"/workload/arrival: expected one of \"poisson\", \"gamma\", \"trace\" "
                           "(got \"poison\") (did you mean \"poisson\"?)"});
}

TEST(ScenarioRules, GammaNeedsCvAndPoissonRejectsIt) {
  json j = minimal_json();
  j["workload"]["arrival"] = "gamma";
  EXPECT_EQ(problems(j), V{"/workload/cv: is required"});
  j["workload"]["arrival"] = "poisson";
  j["workload"]["cv"] = 2;
  EXPECT_EQ(problems(j), V{"/workload/cv: applies only to arrival \"gamma\" (poisson has cv 1)"});
}

TEST(ScenarioRules, NegativeRateIsRejected) {
  json j = minimal_json();
  j["workload"]["rate"] = -1;
  EXPECT_EQ(problems(j), V{"/workload/rate: must be > 0 (got -1)"});
}

TEST(ScenarioRules, TokenDistributionsAreChecked) {
  json j = minimal_json();
  j["workload"]["prompt_tokens"] = {{"distribution", "uniform"}, {"min", 100}, {"max", 10}};
  j["workload"]["output_tokens"] = {{"distribution", "fixed"}, {"value", 4}, {"cv", 1}};
  EXPECT_EQ(problems(j),
            (V{"/workload/prompt_tokens/max: must be >= min (100)",
               "/workload/output_tokens/cv: applies only to distribution \"lognormal\""}));
  j = minimal_json();
  j["workload"]["prompt_tokens"] = 0;
  EXPECT_EQ(problems(j), V{"/workload/prompt_tokens: must be in [1, 10000000] (got 0)"});
}

TEST(ScenarioRules, TraceArrivalRejectsGeneratorFields) {
  json j = minimal_json();
  j["workload"] = {{"arrival", "trace"}, {"trace", "traces/one-request-512.csv"}, {"rate", 3}};
  EXPECT_EQ(problems(j),
            V{"/workload/rate: does not apply to arrival \"trace\" (the trace gives it)"});
}

TEST(ScenarioRules, PrefixCachingFieldsAreChecked) {
  json j = minimal_json();
  j["serving"] = {{"prefix_cache", {{"block_tokens", 0}}}};
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/block_tokens: must be in [1, 1048576] (got 0)"});
  j["serving"] = {{"kv_block_tokens", 16}, {"prefix_cache", {{"block_tokens", 500}}}};
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/block_tokens: must be a multiple of "
                           "serving.kv_block_tokens (16), got 500"});
  j = minimal_json();
  j["workload"]["shared_prefix"] = {{"share", 1.5}, {"groups", 0}, {"tokens", 0}};
  EXPECT_EQ(problems(j), (V{"/workload/shared_prefix/share: must be >= 0 and <= 1 (got 1.5)",
                            "/workload/shared_prefix/groups: must be in [1, 1000000] (got 0)",
                            "/workload/shared_prefix/tokens: must be in [1, 10000000] (got 0)"}));
  j["workload"]["shared_prefix"] = {{"share", 0.5}};
  EXPECT_EQ(problems(j), V{"/workload/shared_prefix/tokens: is required"});
  j = minimal_json();
  j["workload"] = {{"arrival", "trace"},
                   {"trace", "traces/one-request-512.csv"},
                   {"shared_prefix", {{"share", 1}, {"tokens", 64}}}};
  EXPECT_EQ(problems(j), V{"/workload/shared_prefix: does not apply to arrival \"trace\" (the "
                           "trace gives it)"});
  j = minimal_json();
  j["serving"] = {{"prefix_cache", json::object()}};
  j["workload"]["shared_prefix"] = {{"share", 0.25}, {"groups", 3}, {"tokens", 256}};
  const input::ScenarioSpec s = testing::load(j);
  EXPECT_TRUE(s.serving.prefix_cache.enabled);
  EXPECT_EQ(s.serving.prefix_cache.block_tokens, 512);
  ASSERT_TRUE(s.workload.shared_prefix);
  EXPECT_EQ(s.workload.shared_prefix->groups, 3);
  EXPECT_EQ(s.workload.shared_prefix->tokens, 256);
}

TEST(ScenarioRules, UnreadableTraceIsNamedAtItsPointer) {
  json j = minimal_json();
  j["workload"] = {{"arrival", "trace"}, {"trace", "traces/missing.csv"}};
  EXPECT_EQ(problems(j), V{"/workload/trace: " + std::string(KVSHIFT_SOURCE_DIR) +
                           "/scenarios/traces/missing.csv: cannot open trace file"});
}

TEST(ScenarioRules, FoldersAndDevicesAreNotReadAsInputFiles) {
  json j = minimal_json();
  j["workload"] = {{"arrival", "trace"}, {"trace", "traces"}};
  j["model"] = "/dev/zero.json";
  EXPECT_EQ(problems(j), (V{"/model: /dev/zero.json: cannot open file",
                            "/workload/trace: " + std::string(KVSHIFT_SOURCE_DIR) +
                                "/scenarios/traces: not a regular file"}));
}

TEST(ScenarioRules, ClusterNeedsNodesOrAGenerator) {
  json j = minimal_json();
  j["cluster"] = json::object();
  EXPECT_EQ(problems(j),
            V{"/cluster: expected \"nodes\" and \"links\", or a generator: star, ring, "
              "leaf_spine, multi_site"});
}

TEST(ScenarioRules, OnlyOneGenerator) {
  json j = minimal_json();
  j["cluster"] = {{"star", {{"nodes", 2}, {"bandwidth", "1Gbps"}}},
                  {"ring", {{"nodes", 3}, {"bandwidth", "1Gbps"}}}};
  EXPECT_EQ(problems(j),
            V{"/cluster/ring: only one generator per cluster (already have \"star\")"});
}

TEST(ScenarioRules, RingNeedsThreeNodes) {
  json j = minimal_json();
  j["cluster"] = {{"ring", {{"nodes", 2}, {"bandwidth", "1Gbps"}}}};
  EXPECT_EQ(problems(j), V{"/cluster/ring/nodes: must be in [3, 100000] (got 2)"});
}

TEST(ScenarioRules, LeafSpineTakesUplinkOrOversubscriptionNotBoth) {
  json j = minimal_json();
  j["cluster"] = {{"leaf_spine",
                   {{"leaves", 2},
                    {"spines", 2},
                    {"nodes_per_leaf", 2},
                    {"node_bandwidth", "100Gbps"},
                    {"uplink_bandwidth", "50Gbps"},
                    {"oversubscription", 2}}}};
  EXPECT_EQ(problems(j), V{"/cluster/leaf_spine/oversubscription: give either uplink_bandwidth or "
                           "oversubscription, not both (the other is derived)"});
  j["cluster"]["leaf_spine"].erase("oversubscription");
  j["cluster"]["leaf_spine"]["latency"] = "2us";
  j["cluster"]["leaf_spine"]["uplink_latency"] = "3us";
  const input::ScenarioSpec s = testing::load(j);
  for (const sim::ClusterLink& l : s.cluster.links) {
    const bool uplink = s.cluster.nodes[l.a].name.starts_with("leaf");
    EXPECT_DOUBLE_EQ(l.bandwidth.value, uplink ? 50e9 : 100e9) << l.name;
    EXPECT_EQ(l.latency, uplink ? sim::microseconds(3) : sim::microseconds(2)) << l.name;
  }
}

TEST(ScenarioRules, StorageNodesTakeCapacityNotGpus) {
  json j = minimal_json();
  j["cluster"]["nodes"].push_back({{"name", "s"}, {"kind", "storage"}, {"gpus", 2}});
  EXPECT_EQ(problems(j), (V{"/cluster/nodes/2/gpus: applies only to kind \"gpu\"",
                            "/cluster/nodes/2/capacity: is required"}));
}

TEST(ScenarioRules, EventFieldsMustFitTheType) {
  json j = minimal_json();
  j["events"] = {{{"type", "drain"}, {"at", "1s"}, {"node", "a"}, {"link", "a-b"}},
                 {{"type", "link_degrade"}, {"at", "1s"}, {"link", "a-b"}},
                 {{"type", "node_failur"}, {"at", "1s"}, {"node", "a"}}};
  EXPECT_EQ(
      problems(j),
      (V{"/events/0/link: does not apply to event type \"drain\"",
         "/events/1: link_degrade needs \"bandwidth\" or \"latency\" (the degraded value)",
         "/events/2/type: expected one of \"node_failure\", \"node_repair\", \"gpu_failure\", "
         "\"link_degrade\", "
         "\"link_failure\", \"link_repair\", \"drain\", \"path_stall\", \"path_failure\" "
         "(got \"node_failur\") (did you mean "
         "\"node_failure\"?)"}));
}

TEST(ScenarioRules, APrefillChunkOfZeroTokensIsRefused) {
  json j = minimal_json();
  j["serving"] = {{"prefill_chunk_tokens", 0}};
  const V got = problems(j);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("/serving/prefill_chunk_tokens: ", 0), 0u) << got[0];
  j["serving"]["prefill_chunk_tokens"] = 512;
  EXPECT_EQ(problems(j), V{});
}

TEST(ScenarioRules, PreemptionNamesItsModeAndBoundsItsWatermark) {
  json j = minimal_json();
  j["serving"] = {{"preemption", json::object()}};
  EXPECT_EQ(problems(j), V{"/serving/preemption/mode: is required"});
  j["serving"]["preemption"] = {{"mode", "swapp"}};
  EXPECT_EQ(problems(j), V{"/serving/preemption/mode: expected one of \"recompute\", \"swap\" "
                           "(got \"swapp\") (did you mean \"swap\"?)"});
  j["serving"]["preemption"] = {{"mode", "swap"}, {"watermark", 0.6}};
  const V got = problems(j);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("/serving/preemption/watermark: ", 0), 0u) << got[0];
  j["serving"]["preemption"] = {{"mode", "recompute"}, {"watermark", 0.05}, {"victim", "last"}};
  const V unknown = problems(j);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].rfind("/serving/preemption/victim: ", 0), 0u) << unknown[0];
  j["serving"]["preemption"].erase("victim");
  EXPECT_EQ(problems(j), V{});
}

TEST(ScenarioRules, GpuFailureFieldsAreChecked) {
  json j = minimal_json();
  j["events"] = {{{"type", "gpu_failure"}, {"at", "1s"}, {"node", "a"}, {"gpu", -1}},
                 {{"type", "node_failure"}, {"at", "1s"}, {"node", "a"}, {"gpu", 0}},
                 {{"type", "gpu_failure"}, {"at", "1s"}, {"node", "a"}, {"repair_after", "0s"}}};
  const V got = problems(j);
  ASSERT_EQ(got.size(), 3u) << ::testing::PrintToString(got);
  EXPECT_EQ(got[0].rfind("/events/0/gpu: ", 0), 0u) << got[0];
  EXPECT_EQ(got[1], "/events/1/gpu: does not apply to event type \"node_failure\"");
  EXPECT_EQ(got[2].rfind("/events/2/repair_after: ", 0), 0u) << got[2];
}

TEST(ScenarioRules, EventsAreSortedByTimeStably) {
  json j = minimal_json();
  j["events"] = {{{"type", "drain"}, {"at", "5s"}, {"node", "a"}},
                 {{"type", "node_failure"}, {"at", "1s"}, {"node", "b"}},
                 {{"type", "node_repair"}, {"at", "5s"}, {"node", "b"}}};
  const input::ScenarioSpec s = testing::load(j);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events[0].kind, sim::EventKind::kNodeFailure);
  EXPECT_EQ(s.events[1].kind, sim::EventKind::kDrain);
  EXPECT_EQ(s.events[2].kind, sim::EventKind::kNodeRepair);
}

TEST(ScenarioRules, StrategiesAreKnownAndUnique) {
  json j = minimal_json();
  j["policies"] = {{"strategies", {"full_kv", "replay", "full_kv"}}};
  EXPECT_EQ(
      problems(j),
      (V{"/policies/strategies/1: expected one of \"full_kv\", \"token_replay\", \"risk_kv\", "
         "\"proxy_kv\", \"prefix_recompute\", \"hybrid\", \"adaptive\" (got \"replay\")",
         "/policies/strategies/2: duplicate strategy \"full_kv\""}));
  j["policies"]["strategies"] = json::array();
  EXPECT_EQ(problems(j), V{"/policies/strategies: expected at least one strategy"});
}

TEST(ScenarioRules, StoragePlacementNeedsAStoreName) {
  json j = minimal_json();
  j["protection"] = {{"mode", "full"}, {"placement", "storage"}};
  EXPECT_EQ(problems(j), V{"/protection/store: is required"});
  j["protection"] = {{"mode", "none"}, {"placement", "next_node"}};
  EXPECT_EQ(problems(j),
            V{"/protection/placement: does not apply to mode \"none\" (nothing is replicated)"});
}

TEST(ScenarioRules, RiskKvTopologyMustBeValidForTheModel) {
  json j = minimal_json();
  j["risk_kv"] = {{"topology", "G1"}, {"delta_nll", 0.01}};
  const V p = problems(j);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("/risk_kv/topology: ", 0), 0u) << p[0];
  j["risk_kv"]["topology"] = "none";
  EXPECT_EQ(problems(j), V{"/risk_kv/topology: omits no layer group (\"none\"); RISK-KV needs at "
                           "least one"});
}

TEST(ScenarioRules, RiskKvNeedsItsDeltaNll) {
  json j = minimal_json();
  j["risk_kv"] = {{"topology", "paper"}};
  EXPECT_EQ(problems(j), V{"/risk_kv/delta_nll: is required (the topology's measured ΔNLL in "
                           "nats/token; or put {\"quality\": {\"delta_nll\": x}} in its "
                           "topology.json)"});
}

TEST(ScenarioRules, InlineTopologyCarriesItsQuality) {
  json j = minimal_json();
  j["risk_kv"] = {{"topology", {{"omitted_groups", {2, 5}}, {"quality", {{"delta_nll", 0.07}}}}}};
  const input::ScenarioSpec s = testing::load(j);
  EXPECT_EQ(s.risk_kv->omission.describe(), "G2,G5");
  EXPECT_DOUBLE_EQ(s.risk_kv->delta_nll, 0.07);
}

TEST(ScenarioRules, TopologyQualityUnderCalibratesKeyAndTheScenarioWins) {
  json j = minimal_json();
  j["risk_kv"] = {
      {"topology", {{"omitted_groups", {3}}, {"quality", {{"delta_nll_mean", 0.0125}}}}}};
  EXPECT_DOUBLE_EQ(testing::load(j).risk_kv->delta_nll, 0.0125);
  j["risk_kv"]["delta_nll"] = 0.5;
  EXPECT_DOUBLE_EQ(testing::load(j).risk_kv->delta_nll, 0.5);
}

TEST(ScenarioRules, TopologyQualityOutOfRangeIsAnErrorNotAClamp) {
  for (double bad : {-1.0, 1e9}) {
    json j = minimal_json();
    j["risk_kv"] = {
        {"topology", {{"omitted_groups", {3}}, {"quality", {{"delta_nll_mean", bad}}}}}};
    const V p = problems(j);
    ASSERT_EQ(p.size(), 1u) << bad;
    EXPECT_NE(p[0].find("/risk_kv/topology: "), std::string::npos) << p[0];
    EXPECT_NE(p[0].find("quality.delta_nll_mean must be in [-0.1, 100] nats/token"),
              std::string::npos)
        << p[0];
  }
  json j = minimal_json();
  j["risk_kv"] = {{"topology",
                   {{"omitted_groups", {3}},
                    {"quality", {{"delta_nll_mean", -0.0007}, {"violation_share", 1.5}}}}}};
  EXPECT_EQ(problems(j).size(), 1u)
      << "a small negative mean is measurement noise; 1.5 is not a share";
  j["risk_kv"]["topology"]["quality"]["violation_share"] = 0.25;
  const auto spec = testing::load(j);
  EXPECT_DOUBLE_EQ(spec.risk_kv->delta_nll, -0.0007);
  EXPECT_DOUBLE_EQ(*spec.risk_kv->violation_share, 0.25);
}

TEST(ScenarioRules, CostSourceForms) {
  json j = minimal_json();
  j["cost_source"] = "measured";
  EXPECT_EQ(problems(j), V{"/cost_source: expected \"analytic\", \"profile:PATH\" or \"live\" (got "
                           "\"measured\")"});
  j["cost_source"] = "live";
  EXPECT_EQ(problems(j), V{"/live: required with cost_source \"live\": at least {\"model\": a "
                           "folder with the weights} (see scenarios/README.md)"});
  j["live"] = {{"model", "/no/such/folder"}, {"backend", "opencl"}, {"repeats", 0}};
  EXPECT_EQ(problems(j),
            (V{"/live/backend: expected one of \"cpu\", \"cuda\" (got \"opencl\")",
               "/live/repeats: must be in [1, 1000] (got 0)",
               "/live/model: /no/such/folder is not a model folder (no config.json)"}));
  j["cost_source"] = "analytic";
  j["live"] = {{"model", "/no/such/folder"}};
  EXPECT_EQ(problems(j), V{"/live: applies only to cost_source \"live\""});
}

TEST(ScenarioRules, EveryProblemIsReportedAtOnce) {
  json j = quickstart_json();
  j["seed"] = -4;
  j["serving"]["max_batch"] = 0;
  j["outputs"]["files"] = {"summary", "html"};
  j["slo"]["ttft"] = "fast";
  const V p = problems(j);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], "/serving/max_batch: must be in [1, 65536] (got 0)");
  EXPECT_EQ(p[1], "/seed: must be in [0, 9223372036854775807] (got -4)");
  EXPECT_EQ(p[2].rfind("/slo/ttft: ", 0), 0u);
  EXPECT_EQ(p[3],
            "/outputs/files/1: expected one of \"summary\", \"requests\", \"recoveries\", "
            "\"links\", \"trace\" (got \"html\")");
}

TEST(ScenarioRules, ThrowingLoaderPrefixesEveryProblemWithTheSource) {
  json j = minimal_json();
  j["duration"] = "soon";
  j["sedd"] = 1;
  try {
    load_scenario_text(j.dump(), "my.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("my.json: /sedd: unknown key", 0), 0u) << m;
    EXPECT_NE(m.find("\n  my.json: /duration: "), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kvshift::input
