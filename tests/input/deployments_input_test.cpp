// The "deployments" section: several models on one cluster, each on pools of its own. Bad
// input names the field; a trace request names a deployment by its "model".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "input/scenario_loader.hpp"
#include "scenario_test_util.hpp"

namespace kvshift::input {
namespace {

using testing::json;
using testing::load;
using testing::minimal_json;
using testing::problems;
using V = std::vector<std::string>;

// Four single-GPU nodes in two pools, one deployment on each.
json two_models() {
  json j = minimal_json();
  j.erase("model");
  j["cluster"] = json::parse(R"({"node": {"gpus": 1, "host_memory": "64GiB"},
                                 "star": {"nodes": 4, "bandwidth": "10Gbps", "latency": "10us"}})");
  j["pools"] = json::parse(R"([{"name": "p0", "role": "mixed", "nodes": ["gpu0", "gpu1"]},
                               {"name": "p1", "role": "mixed", "nodes": ["gpu2", "gpu3"]}])");
  j["deployments"] = json::parse(R"([
    {"name": "small", "model": "qwen2.5-0.5b", "pools": ["p0"], "share": 0.25},
    {"name": "big", "model": "llama-3.1-8b", "pools": ["p1"], "share": 0.75,
     "risk_kv": {"topology": "G3-G6", "delta_nll": 0.04}}])");
  return j;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(Deployments, LoadEachModelOnItsPools) {
  const ScenarioSpec s = load(two_models());
  ASSERT_EQ(s.deployments.size(), 2u);
  EXPECT_EQ(s.deployments[0].name, "small");
  EXPECT_EQ(s.deployments[0].model.name, "qwen2.5-0.5b");
  EXPECT_EQ(s.deployments[0].pools, std::vector<int>{0});
  EXPECT_EQ(s.deployments[0].share, 0.25);
  EXPECT_FALSE(s.deployments[0].risk_kv);
  EXPECT_EQ(s.deployments[1].model.name, "llama-3.1-8b");
  EXPECT_EQ(s.deployments[1].pools, std::vector<int>{1});
  ASSERT_TRUE(s.deployments[1].risk_kv);
  EXPECT_EQ(s.deployments[1].risk_kv->delta_nll, 0.04);
  // The scenario's model and methods are the first deployment's.
  EXPECT_EQ(s.model.name, "qwen2.5-0.5b");
  EXPECT_FALSE(s.risk_kv);
}

TEST(Deployments, TopLevelModelAndMethodsAreRefused) {
  json j = two_models();
  j["model"] = "qwen2.5-0.5b";
  j["proxy_kv"] = {{"proxy_model", "qwen2.5-0.5b"}, {"delta_nll", 0.1}};
  const V got = problems(j);
  ASSERT_EQ(got.size(), 2u) << ::testing::PrintToString(got);
  EXPECT_TRUE(starts_with(got[0], "/model: with \"deployments\"")) << got[0];
  EXPECT_TRUE(starts_with(got[1], "/proxy_kv: with \"deployments\"")) << got[1];
}

TEST(Deployments, EachNamesAModelAndKnownPools) {
  json j = two_models();
  j["deployments"][0].erase("model");
  j["deployments"][1]["pools"] = {"p2"};
  const V got = problems(j);
  ASSERT_EQ(got.size(), 3u) << ::testing::PrintToString(got);
  EXPECT_EQ(got[0], "/deployments/0/model: is required");
  EXPECT_EQ(got[1], "/deployments/1/pools/0: unknown pool \"p2\" (did you mean \"p0\"?)");
  EXPECT_EQ(got[2], "/deployments: pool \"p1\" serves no deployment");
}

TEST(Deployments, APoolServesOneDeployment) {
  json j = two_models();
  j["deployments"][1]["pools"] = {"p1", "p0"};
  EXPECT_EQ(problems(j),
            V{"/deployments/1/pools/1: pool \"p0\" already serves deployment \"small\""});
  j["deployments"][1]["pools"] = {"p1", "p1"};
  EXPECT_EQ(problems(j), V{"/deployments/1/pools/1: pool \"p1\" is listed twice"});
}

TEST(Deployments, NamesAreUnique) {
  json j = two_models();
  j["deployments"][1]["name"] = "small";
  EXPECT_EQ(problems(j), V{"/deployments/1/name: duplicate deployment name \"small\""});
}

TEST(Deployments, SharesAreAllOrNoneAndAddUpToOne) {
  json j = two_models();
  j["deployments"][1]["share"] = 0.5;
  EXPECT_EQ(problems(j),
            V{"/deployments: the deployments' shares must add up to 1 (they add up to 0.750000)"});
  j["deployments"][1].erase("share");
  EXPECT_EQ(problems(j), V{"/deployments: give every deployment a \"share\", or none"});
  j["deployments"][0].erase("share");
  EXPECT_EQ(problems(j), V{"/deployments: a generated workload's arrivals name no model: give "
                           "every deployment a \"share\""});
  j["deployments"][0]["share"] = 0;
  j["deployments"][1]["share"] = 1;
  const V zero = problems(j);
  ASSERT_EQ(zero.size(), 1u) << ::testing::PrintToString(zero);
  EXPECT_TRUE(starts_with(zero[0], "/deployments/0/share: ")) << zero[0];
}

TEST(Deployments, NeedPoolsAndAnalyticCosts) {
  json j = two_models();
  j.erase("pools");
  EXPECT_EQ(problems(j), V{"/deployments: needs \"pools\": each deployment runs on pools of its "
                           "own (name them there)"});
  j = two_models();
  j["cost_source"] = "profile:costs.json";
  const V got = problems(j);
  ASSERT_FALSE(got.empty());
  EXPECT_NE(std::find(got.begin(), got.end(),
                      "/deployments: several models need \"cost_source\": \"analytic\" (a "
                      "profiled or live cost table measures one model)"),
            got.end())
      << ::testing::PrintToString(got);
}

TEST(Deployments, MethodChecksNameTheDeployment) {
  json j = two_models();
  j["policies"] = {{"strategies", {"full_kv", "risk_kv"}}};
  // "small" has no risk_kv section; "big" has one.
  EXPECT_EQ(problems(j), V{"/policies/strategies/1: deployment \"small\": strategy \"risk_kv\" "
                           "needs a \"risk_kv\" section"});
  j["deployments"][0]["proxy_kv"] = {
      {"proxy_model", "llama-3.2-1b"}, {"retention", 0.5}, {"delta_nll", 0.1}};
  j["deployments"][0]["risk_kv"] = j["deployments"][1]["risk_kv"];
  const V got = problems(j);
  ASSERT_EQ(got.size(), 1u) << ::testing::PrintToString(got);
  EXPECT_TRUE(starts_with(got[0],
                          "/deployments/0/proxy_kv/proxy_model: proxy llama-3.2-1b has a "
                          "different tokenizer from qwen2.5-0.5b"))
      << got[0];
}

TEST(Deployments, EachModelMustFitItsOwnPoolsHbm) {
  json j = two_models();
  // 12 GiB GPUs hold the small model's weights but not the 8B model's (15 GiB of bf16).
  j["cluster"]["node"]["hbm"] = "12GiB";
  const V got = problems(j);
  ASSERT_EQ(got.size(), 1u) << ::testing::PrintToString(got);
  EXPECT_NE(got[0].find("deployment \"big\": model llama-3.1-8b weights"), std::string::npos)
      << got[0];
}

TEST(Deployments, GeneratedArrivalsMayHaveEachDeploymentsOwnLengths) {
  json j = two_models();
  j["deployments"][1]["prompt_tokens"] = 4096;
  j["deployments"][1]["output_tokens"] = {{"distribution", "uniform"}, {"min", 8}, {"max", 4}};
  EXPECT_EQ(problems(j), V{"/deployments/1/output_tokens/max: must be >= min (8)"});
  j["deployments"][1]["output_tokens"]["max"] = 64;
  const ScenarioSpec s = load(j);
  ASSERT_TRUE(s.deployments[1].prompt_tokens);
  EXPECT_EQ(s.deployments[1].prompt_tokens->value, 4096);
  EXPECT_EQ(s.deployments[1].output_tokens->max, 64);
  EXPECT_FALSE(s.deployments[0].prompt_tokens);
  // A trace gives each request's lengths.
  j["workload"] = {{"arrival", "trace"}, {"trace", "traces/sample-mooncake.jsonl"}};
  EXPECT_EQ(problems(j), (V{"/deployments/1/prompt_tokens: does not apply to arrival \"trace\" "
                            "(the trace gives it)",
                            "/deployments/1/output_tokens: does not apply to arrival \"trace\" "
                            "(the trace gives it)"}));
}

TEST(Deployments, StorageTierIsOneModels) {
  json j = two_models();
  j["cluster"]["nodes"] = {{{"name", "store"}, {"kind", "storage"}, {"capacity", "1TiB"}}};
  j["cluster"]["links"] = {
      {{"a", "store"}, {"b", "hub"}, {"bandwidth", "10Gbps"}, {"latency", "10us"}}};
  j["serving"] = {
      {"prefix_cache",
       {{"enabled", true}, {"host_offload", true}, {"storage_tier", {{"node", "store"}}}}}};
  EXPECT_EQ(problems(j), V{"/deployments: serving.prefix_cache.storage_tier holds one model's "
                           "blocks; it cannot be shared by several deployments"});
}

// A trace whose requests name deployments by "model" (its own file per test).
json with_trace(const std::string& name, const std::string& lines) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kvshift-deployments-" + name + ".jsonl");
  std::ofstream(path) << lines;
  json j = two_models();
  j["workload"] = {{"arrival", "trace"}, {"trace", path.string()}};
  return j;
}

TEST(Deployments, TraceRequestsNameTheirDeployment) {
  const json j = with_trace(
      "named", R"({"timestamp": 0, "input_length": 64, "output_length": 4, "model": "big"}
{"timestamp": 5, "input_length": 64, "output_length": 4, "model": "small"}
{"timestamp": 9, "input_length": 64, "output_length": 4}
)");
  const ScenarioSpec s = load(j);
  ASSERT_EQ(s.workload.trace.size(), 3u);
  EXPECT_EQ(s.workload.trace[0].deployment, 1);
  EXPECT_EQ(s.workload.trace[1].deployment, 0);
  EXPECT_EQ(s.workload.trace[2].deployment, -1);  // drawn by share
}

TEST(Deployments, AnUnknownModelInATraceIsRefused) {
  const json j = with_trace(
      "unknown", R"({"timestamp": 0, "input_length": 64, "output_length": 4, "model": "bigg"}
{"timestamp": 1, "input_length": 64, "output_length": 4, "model": "huge"}
{"timestamp": 2, "input_length": 64, "output_length": 4, "model": "huge"}
)");
  EXPECT_EQ(problems(j),
            (V{"/workload/trace: request 0 (in arrival order): field \"model\": unknown model "
               "\"bigg\" (did you mean \"big\"?) (the scenario serves: small, big)",
               "/workload/trace: 2 more requests name an unknown model"}));
}

TEST(Deployments, WithoutSharesEveryTraceRequestNamesOne) {
  json j = with_trace("unnamed",
                      R"({"timestamp": 0, "input_length": 64, "output_length": 4, "model": "big"}
{"timestamp": 1, "input_length": 64, "output_length": 4}
)");
  j["deployments"][0].erase("share");
  j["deployments"][1].erase("share");
  EXPECT_EQ(problems(j), V{"/workload/trace: request 1 (in arrival order) names no model, and "
                           "the deployments have no \"share\" to draw one by"});
}

TEST(Deployments, OneModelTraceMayNameOnlyItsModel) {
  json j = minimal_json();
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "kvshift-deployments-one-model.jsonl";
  std::ofstream(path)
      << R"({"timestamp": 0, "input_length": 64, "output_length": 4, "model": "qwen2.5-0.5b"}
{"timestamp": 1, "input_length": 64, "output_length": 4, "model": "qwen2.5-7b"}
)";
  j["workload"] = {{"arrival", "trace"}, {"trace", path.string()}};
  EXPECT_EQ(problems(j),
            V{"/workload/trace: request 1 (in arrival order): field \"model\": unknown model "
              "\"qwen2.5-7b\" (the scenario serves: qwen2.5-0.5b)"});
}

}  // namespace
}  // namespace kvshift::input
