// Pass two of the loader (cross-references), one test per rule, exact
// pointers and messages; and that pass two waits for a clean pass one.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "tests/input/scenario_test_util.hpp"

namespace kvshift::input {
namespace {

using testing::json;
using testing::load;
using testing::minimal_json;
using testing::problems;
using testing::quickstart_json;
using V = std::vector<std::string>;

TEST(ScenarioCross, LinkEndpointsMustExist) {
  json j = minimal_json();
  j["cluster"]["links"][0]["a"] = "bb";
  EXPECT_EQ(problems(j), V{"/cluster/links/0/a: unknown node \"bb\" (did you mean \"b\"?)"});
  j["cluster"]["links"][0]["a"] = "a";
  j["cluster"]["links"][0]["b"] = "c";
  EXPECT_EQ(problems(j), V{"/cluster/links/0/b: unknown node \"c\""});
}

TEST(ScenarioCross, LinksJoinTwoDifferentNodes) {
  json j = minimal_json();
  j["cluster"]["links"].push_back(
      {{"name", "loop"}, {"a", "a"}, {"b", "a"}, {"bandwidth", "1Gbps"}});
  EXPECT_EQ(problems(j), V{"/cluster/links/1/b: a link must join two different nodes (got \"a\" "
                           "twice)"});
}

TEST(ScenarioCross, NodeAndLinkNamesAreUnique) {
  json j = minimal_json();
  j["cluster"]["nodes"].push_back({{"name", "a"}});
  j["cluster"]["links"].push_back({{"a", "a"}, {"b", "b"}, {"bandwidth", "1Gbps"}});
  EXPECT_EQ(problems(j), (V{"/cluster/nodes/2/name: duplicate node name \"a\"",
                            "/cluster/links/1/name: duplicate link name \"a-b\""}));
}

TEST(ScenarioCross, ExplicitAdditionsMayNotReuseGeneratedNames) {
  json j = minimal_json();
  j["cluster"] = {{"star", {{"nodes", 2}, {"bandwidth", "1Gbps"}}}, {"nodes", {{{"name", "hub"}}}}};
  EXPECT_EQ(problems(j), V{"/cluster/nodes/0/name: duplicate node name \"hub\""});
}

TEST(ScenarioCross, ClusterNeedsAGpuNode) {
  json j = minimal_json();
  j["cluster"]["nodes"] = {{{"name", "a"}, {"kind", "switch"}},
                           {{"name", "b"}, {"kind", "switch"}}};
  EXPECT_EQ(problems(j), V{"/cluster: has no GPU node"});
}

TEST(ScenarioCross, EveryNodeMustBeReachable) {
  json j = minimal_json();
  j["cluster"]["nodes"].push_back({{"name", "island"}});
  EXPECT_EQ(problems(j),
            V{"/cluster/nodes/2: node \"island\" is not connected to \"a\" by any path "
              "of links"});
}

TEST(ScenarioCross, ModelWeightsMustFitInHbm) {
  json j = minimal_json();
  j["model"] = "llama-3.1-8b";
  j["gpu"] = "rtx3060-laptop";
  EXPECT_EQ(problems(j), V{"/gpu: model llama-3.1-8b weights (14.96 GiB) do not fit in the 6.00 "
                           "GiB HBM of a GPU of node \"a\""});
}

TEST(ScenarioCross, PerNodeHbmOverrideIsNamed) {
  json j = minimal_json();
  j["cluster"]["nodes"][1]["hbm"] = "512MiB";
  EXPECT_EQ(problems(j),
            V{"/cluster/nodes/1/hbm: model qwen2.5-0.5b weights (0.92 GiB) do not fit in "
              "the 0.50 GiB HBM of a GPU of node \"b\""});
}

TEST(ScenarioCross, TemplateHbmIsNamedOnceForAllGeneratedNodes) {
  json j = quickstart_json();
  j["cluster"]["node"]["hbm"] = "1GiB";
  EXPECT_EQ(problems(j), V{"/cluster/node/hbm: model qwen2.5-1.5b weights (2.88 GiB) do not fit in "
                           "the 1.00 GiB HBM of a GPU of node \"gpu0\""});
}

TEST(ScenarioCross, LargestRequestMustFitBesideTheWeights) {
  json j = minimal_json();
  j["gpu"] = {{"base", "h100"}, {"hbm_capacity", "2GiB"}};
  j["workload"]["prompt_tokens"] = 100000;
  EXPECT_EQ(problems(j),
            V{"/gpu: the largest request (100016 tokens, 1.14 GiB of KV) does not fit "
              "beside the model weights (0.92 GiB) in the 2.00 GiB HBM of node \"a\""});
}

TEST(ScenarioCross, EventTargetsMustExist) {
  json j = quickstart_json();
  j["events"][0]["node"] = "gpu9";
  j["events"][1]["link"] = "gpu2-hbu";
  EXPECT_EQ(problems(j),
            (V{"/events/0/node: unknown node \"gpu9\" (did you mean \"gpu0\"?)",
               "/events/1/link: unknown link \"gpu2-hbu\" (did you mean \"gpu2-hub\"?)"}));
}

TEST(ScenarioCross, EventsFallInsideTheDuration) {
  json j = minimal_json();
  j["events"] = {{{"type", "node_failure"}, {"at", "11s"}, {"node", "a"}}};
  EXPECT_EQ(problems(j), V{"/events/0/at: must be within the scenario's duration (10000.000 ms) "
                           "(got 11000.000 ms)"});
}

TEST(ScenarioCross, EventPointersSurviveSorting) {
  json j = minimal_json();
  j["events"] = {{{"type", "drain"}, {"at", "5s"}, {"node", "a"}},
                 {{"type", "node_failure"}, {"at", "1s"}, {"node", "zz"}}};
  EXPECT_EQ(problems(j), V{"/events/1/node: unknown node \"zz\""});
}

TEST(ScenarioCross, DrainNeedsAGpuNode) {
  json j = minimal_json();
  j["cluster"]["nodes"].push_back({{"name", "s"}, {"kind", "storage"}, {"capacity", "1TB"}});
  j["cluster"]["links"].push_back({{"a", "s"}, {"b", "a"}, {"bandwidth", "1Gbps"}});
  j["events"] = {{{"type", "drain"}, {"at", "1s"}, {"node", "s"}}};
  EXPECT_EQ(problems(j), V{"/events/0/node: drain needs a GPU node (\"s\" is not one)"});
}

TEST(ScenarioCross, GpuFailureNeedsAGpuThatExists) {
  json j = minimal_json();
  j["cluster"]["node"] = {{"gpus", 2}};
  j["cluster"]["nodes"].push_back({{"name", "s"}, {"kind", "storage"}, {"capacity", "1TB"}});
  j["cluster"]["links"].push_back({{"a", "s"}, {"b", "a"}, {"bandwidth", "1Gbps"}});
  j["events"] = {{{"type", "gpu_failure"}, {"at", "1s"}, {"node", "a"}, {"gpu", 2}},
                 {{"type", "gpu_failure"}, {"at", "2s"}, {"node", "s"}},
                 {{"type", "gpu_failure"}, {"at", "3s"}, {"node", "b"}, {"gpu", 1}}};
  EXPECT_EQ(problems(j), (V{"/events/0/gpu: node \"a\" has 2 GPU(s), numbered from 0 (got 2)",
                            "/events/1/node: gpu_failure needs a GPU node (\"s\" is not one)"}));
}

TEST(ScenarioCross, AHostTierSmallerThanOneBlockIsNamed) {
  json j = minimal_json();
  j["cluster"]["nodes"][1]["host_memory"] = "1MiB";
  j["serving"] = {{"prefix_cache", {{"host_offload", true}}}};
  EXPECT_EQ(problems(j), V{"/cluster/nodes/1/host_memory: the host tier of node \"b\" (1048576 "
                           "bytes) is smaller than one prefix block (6291456 bytes, "
                           "serving.prefix_cache.block_tokens 512)"});
  j["serving"]["prefix_cache"]["host_offload"] = false;
  EXPECT_EQ(problems(j), V{}) << "without the tier, host memory holds only replicas";
  j["serving"]["prefix_cache"]["host_offload"] = "yes";
  EXPECT_EQ(problems(j).size(), 1u);
}

TEST(ScenarioCross, TheStorageTierIsAStorageNodeBelowTheHostTier) {
  json j = minimal_json();
  j["cluster"]["nodes"].push_back({{"name", "store"}, {"kind", "storage"}, {"capacity", "4TiB"}});
  j["cluster"]["links"].push_back({{"a", "store"}, {"b", "a"}, {"bandwidth", "100Gbps"}});
  j["serving"] = {
      {"prefix_cache", {{"host_offload", true}, {"storage_tier", {{"node", "store"}}}}}};
  EXPECT_EQ(problems(j), V{});
  j["serving"]["prefix_cache"]["storage_tier"]["node"] = "stor";
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/storage_tier/node: unknown node \"stor\""});
  j["serving"]["prefix_cache"]["storage_tier"]["node"] = "b";
  EXPECT_EQ(problems(j),
            V{"/serving/prefix_cache/storage_tier/node: node \"b\" is not a storage node"});
  j["cluster"]["nodes"][2]["capacity"] = "1MiB";
  j["serving"]["prefix_cache"]["storage_tier"]["node"] = "store";
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/storage_tier/node: storage node \"store\" "
                           "(1048576 bytes) is smaller than one prefix block (6291456 bytes)"});
  j["cluster"]["nodes"][2]["capacity"] = "4TiB";
  j["serving"]["prefix_cache"]["host_offload"] = false;
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/storage_tier: needs host_offload: true (blocks "
                           "reach the storage node when the node's lowest tier evicts them)"});
  j["serving"]["prefix_cache"]["host_offload"] = true;
  j["serving"]["prefix_cache"]["storage_tier"] = json::object();
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/storage_tier/node: is required"});
}

TEST(ScenarioCross, TheSsdTierNeedsTheHostTierAndRoomForOneBlock) {
  json j = minimal_json();
  j["serving"] = {{"prefix_cache",
                   {{"host_offload", true},
                    {"ssd_tier", {{"capacity", "1MiB"}, {"read_bandwidth", "7GB/s"}}}}}};
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/ssd_tier/capacity: the SSD tier (1048576 bytes a "
                           "node) is smaller than one prefix block (6291456 bytes, "
                           "serving.prefix_cache.block_tokens 512)"});
  j["serving"]["prefix_cache"]["ssd_tier"]["capacity"] = "2TB";
  EXPECT_EQ(problems(j), V{});
  j["serving"]["prefix_cache"]["host_offload"] = false;
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/ssd_tier: needs host_offload: true (blocks reach "
                           "the SSD when the host tier evicts them)"});
  j["serving"]["prefix_cache"]["host_offload"] = true;
  j["serving"]["prefix_cache"]["ssd_tier"] = {{"capacity", "2TB"}, {"read_bandwidth", "0GB/s"}};
  ASSERT_EQ(problems(j).size(), 1u);
  EXPECT_EQ(problems(j)[0].rfind("/serving/prefix_cache/ssd_tier/read_bandwidth: ", 0), 0u)
      << problems(j)[0];
  j["serving"]["prefix_cache"]["ssd_tier"] = {{"capacity", "2TB"}, {"write_bandwidth", "3GB/s"}};
  EXPECT_EQ(problems(j), V{"/serving/prefix_cache/ssd_tier/read_bandwidth: is required"});
  j["serving"]["prefix_cache"]["ssd_tier"]["read_bandwidth"] = "7GB/s";
  j["serving"]["prefix_cache"]["ssd_tier"]["write_bandwidth"] = "0GB/s";
  const V got = problems(j);
  ASSERT_EQ(got.size(), 1u) << ::testing::PrintToString(got);
  EXPECT_EQ(got[0].rfind("/serving/prefix_cache/ssd_tier/write_bandwidth: ", 0), 0u) << got[0];
  j["serving"]["prefix_cache"]["ssd_tier"]["write_bandwidth"] = "3GB/s";
  EXPECT_EQ(load(j).serving.prefix_cache.ssd_tier->write_bandwidth.value, 24e9);
  j["serving"]["prefix_cache"]["ssd_tier"].erase("write_bandwidth");
  EXPECT_EQ(load(j).serving.prefix_cache.ssd_tier->write_bandwidth.value, 56e9)
      << "without one, writes go at the read bandwidth";
}

TEST(ScenarioCross, LocalReplicasNeedNoSecondNode) {
  json j = minimal_json();
  j["cluster"]["nodes"] = {{{"name", "a"}}};
  j["cluster"]["links"] = json::array();
  j["protection"] = {{"mode", "full"}, {"placement", "local"}};
  EXPECT_EQ(problems(j), V{});
  j["protection"]["placement"] = "next_node";
  EXPECT_EQ(problems(j),
            V{"/protection/placement: replicas on another GPU node need at least 2 GPU nodes "
              "(have 1)"});
}

TEST(ScenarioCross, StrategiesNeedTheirMethodSections) {
  json j = minimal_json();
  j["policies"] = {{"strategies", {"risk_kv", "proxy_kv"}}};
  EXPECT_EQ(problems(j),
            (V{"/policies/strategies/0: strategy \"risk_kv\" needs a \"risk_kv\" section",
               "/policies/strategies/1: strategy \"proxy_kv\" needs a \"proxy_kv\" section"}));
}

TEST(ScenarioCross, ProtectionModeNeedsItsMethodSection) {
  json j = minimal_json();
  j["protection"] = {{"mode", "risk_kv"}};
  EXPECT_EQ(problems(j), V{"/protection/mode: protection \"risk_kv\" needs a \"risk_kv\" section"});
}

TEST(ScenarioCross, QualityBudgetExcludesExplicitLossyChoices) {
  json j = quickstart_json();
  j["policies"]["quality_budget"] = 0.04;  // risk_kv 0.03 fits, proxy_kv 0.05 does not
  EXPECT_EQ(problems(j), V{"/policies/strategies/3: strategy \"proxy_kv\" costs ΔNLL 0.05 "
                           "(proxy_kv.delta_nll), over the quality_budget 0.04"});
}

TEST(ScenarioCross, ProxyMustShareTheTokenizerAndBeSmaller) {
  json j = quickstart_json();
  j["proxy_kv"]["proxy_model"] = "smollm2-135m";
  EXPECT_EQ(problems(j), V{"/proxy_kv/proxy_model: proxy smollm2-135m has a different tokenizer "
                           "from qwen2.5-1.5b (vocab 49152 vs 151936); ProxyKV needs a same-family "
                           "proxy"});
  j = quickstart_json();
  j["model"] = "qwen2.5-0.5b";
  j["proxy_kv"]["proxy_model"] = "qwen2.5-1.5b";
  EXPECT_EQ(problems(j), V{"/proxy_kv/proxy_model: proxy qwen2.5-1.5b is not smaller than the "
                           "target qwen2.5-0.5b"});
}

TEST(ScenarioCross, ProxyGpuPlacementNeedsTwoGpusPerNode) {
  json j = quickstart_json();
  j["proxy_kv"]["placement"] = "proxy_gpu";
  EXPECT_EQ(problems(j), V{"/proxy_kv/placement: \"proxy_gpu\" reserves one GPU per node for the "
                           "proxy, but node \"gpu0\" has 1 GPU"});
  j["cluster"]["node"]["gpus"] = 2;
  EXPECT_TRUE(problems(j).empty());
}

TEST(ScenarioCross, ReplicaStoreMustBeAStorageNode) {
  json j = minimal_json();
  j["protection"] = {{"mode", "full"}, {"placement", "storage"}, {"store", "b"}};
  EXPECT_EQ(problems(j), V{"/protection/store: node \"b\" is not a storage node"});
  j["protection"]["store"] = "nas";
  EXPECT_EQ(problems(j), V{"/protection/store: unknown node \"nas\""});
}

TEST(ScenarioCross, ReplicasOnAnotherNodeNeedTwoGpuNodes) {
  json j = minimal_json();
  j["cluster"]["nodes"][1]["kind"] = "switch";
  j["protection"] = {{"mode", "full"}};
  EXPECT_EQ(problems(j),
            V{"/protection/placement: replicas on another GPU node need at least 2 GPU "
              "nodes (have 1)"});
}

TEST(ScenarioCross, PredictorCacheMustHoldOneSet) {
  json j = quickstart_json();
  j["predictors"] = {{"placement", "on_demand"}, {"source", "hub"}, {"hbm_budget", "16MiB"}};
  // qwen2.5-1.5b, paper topology, fp32: 4 groups × 8.004 MiB.
  EXPECT_EQ(problems(j), V{"/predictors/hbm_budget: cannot hold one predictor set of qwen2.5-1.5b "
                           "(32.016 MiB, budget 16.000 MiB)"});
  j["predictors"]["source"] = "nowhere";
  j["predictors"]["hbm_budget"] = "64MiB";
  EXPECT_EQ(problems(j), V{"/predictors/source: unknown node \"nowhere\""});
}

TEST(ScenarioCross, ProfileCostTableMustExist) {
  json j = minimal_json();
  j["cost_source"] = "profile:tables/none.json";
  EXPECT_EQ(problems(j), V{"/cost_source: cost table \"" + std::string(KVSHIFT_SOURCE_DIR) +
                           "/scenarios/tables/none.json\" is not a readable file"});
}

TEST(ScenarioCross, ACostTableMustBeForTheModelAndHoldEveryOpTheScenarioUses) {
  const std::string table =
      std::string(KVSHIFT_SOURCE_DIR) + "/results/costs/smollm2-135m-cpu.json";
  json j = minimal_json();
  j["cost_source"] = "profile:" + table;
  EXPECT_EQ(problems(j), V{"/cost_source: " + table +
                           " was measured for model \"smollm2-135m\", not \"qwen2.5-0.5b\""});
  j["model"] = "smollm2-135m";
  EXPECT_TRUE(problems(j).empty());
  // The same table without its decode rows and proxy_score rows, with ProxyKV in use.
  json t = json::parse(std::ifstream(table));
  json kept = json::array();
  for (const auto& e : t["entries"]) {
    if (e["op"] != "decode" && e["op"] != "proxy_score") kept.push_back(e);
  }
  t["entries"] = kept;
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvshift-cross-table-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << t.dump();
  j["cost_source"] = "profile:" + path.string();
  j["proxy_kv"] = {{"proxy_model", "models/smollm2-135m-first8/config.json"},
                   {"retention", 0.5},
                   {"delta_nll", 0.01}};
  EXPECT_EQ(
      problems(j),
      (V{"/cost_source: " + path.string() +
             " has no \"decode\" entries, and the scenario needs them (every serving step "
             "is one)",
         "/cost_source: " + path.string() +
             " has no \"proxy_score\" entries, and the scenario needs them (it uses ProxyKV)"}));
  std::filesystem::remove(path);
}

TEST(ScenarioCross, CrossChecksWaitForACleanFirstPass) {
  json j = minimal_json();
  j["events"] = {{{"type", "node_failure"}, {"at", "1s"}, {"node", "zz"}}};  // a cross-reference
  j["seed"] = "x";                                                           // a pass-one problem
  EXPECT_EQ(problems(j), V{"/seed: expected an integer (got \"x\")"});
}

}  // namespace
}  // namespace kvshift::input
