// Several deployments (models) in one run. Metamorphic: one deployment named
// explicitly is the same run as the scenario's model. Properties over seeds and
// strategies with failures and drains: every request lives and moves only on its
// deployment's pools, is recorded once, and the deployments' tallies add up to
// the run's. Exact: a move ships its own model's KV bytes. The workload's draw
// of deployments leaves arrivals and lengths as they were.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/move_plan.hpp"
#include "input/scenario_loader.hpp"
#include "reports/strategy_metrics.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {
namespace {

using nlohmann::json;

// Six single-GPU nodes on a star in two pools: "a" (gpu0-2) and "b" (gpu3-5); full replicas
// on the next node; a failure and a drain in each pool.
json base(std::uint64_t seed) {
  return json::parse(R"({
    "name": "two-pools", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"node": {"gpus": 1, "host_memory": "256GiB"},
                "star": {"nodes": 6, "bandwidth": "10Gbps", "latency": "20us"}},
    "pools": [{"name": "a", "role": "mixed", "nodes": ["gpu0", "gpu1", "gpu2"]},
              {"name": "b", "role": "mixed", "nodes": ["gpu3", "gpu4", "gpu5"]}],
    "workload": {"arrival": "poisson", "rate": 12,
                 "prompt_tokens": {"distribution": "lognormal", "mean": 1024, "cv": 0.6,
                                   "min": 32, "max": 8192},
                 "output_tokens": {"distribution": "uniform", "min": 64, "max": 512}},
    "serving": {"max_batch": 16, "kv_block_tokens": 16},
    "protection": {"mode": "full", "placement": "next_node", "stream_every_tokens": 16},
    "events": [
      {"type": "node_failure", "at": "8s", "node": "gpu1", "detection_delay": "200ms",
       "repair_after": "6s"},
      {"type": "node_failure", "at": "9s", "node": "gpu4", "detection_delay": "200ms"},
      {"type": "drain", "at": "14s", "node": "gpu3"}],
    "policies": {"strategies": ["full_kv", "token_replay", "risk_kv", "proxy_kv", "adaptive"],
                 "quality_budget": 0.1},
    "risk_kv": {"topology": "paper", "delta_nll": 0.03},
    "proxy_kv": {"proxy_model": "qwen2.5-0.5b", "retention": 0.5, "delta_nll": 0.05},
    "seed": )" + std::to_string(seed) +
                     R"(, "duration": "25s"})");
}

// The same cluster serving qwen2.5-1.5b on pool "a" and llama-3.1-8b on pool "b".
json two_models(std::uint64_t seed) {
  json j = base(seed);
  const json risk = j["risk_kv"], proxy = j["proxy_kv"];
  for (const char* key : {"model", "risk_kv", "proxy_kv"}) j.erase(key);
  j["deployments"] = {
      {{"name", "qwen"},
       {"model", "qwen2.5-1.5b"},
       {"pools", {"a"}},
       {"share", 0.6},
       {"risk_kv", risk},
       {"proxy_kv", proxy}},
      {{"name", "llama"},
       {"model", "llama-3.1-8b"},
       {"pools", {"b"}},
       {"share", 0.4},
       {"risk_kv", {{"topology", "G3-G6"}, {"delta_nll", 0.04}}},
       {"proxy_kv", {{"proxy_model", "llama-3.2-1b"}, {"retention", 0.5}, {"delta_nll", 0.06}}}}};
  return j;
}

std::vector<RunResult> run(const input::ScenarioSpec& spec) {
  const cost_model::RooflineCosts compute(spec.gpu);
  RunOptions o;
  o.record_trace = false;
  return run_scenario(spec, compute, o);
}

input::ScenarioSpec load(const json& j) { return input::load_scenario_text(j.dump(), "t"); }

TEST(Deployments, OneNamedDeploymentIsTheSameRunAsTheScenarioModel) {
  json named = base(3);
  named["deployments"] = {{{"name", "only"},
                           {"model", named["model"]},
                           {"pools", {"a", "b"}},
                           {"risk_kv", named["risk_kv"]},
                           {"proxy_kv", named["proxy_kv"]}}};
  for (const char* key : {"model", "risk_kv", "proxy_kv"}) named.erase(key);
  const std::vector<RunResult> plain = run(load(base(3)));
  const std::vector<RunResult> one = run(load(named));
  ASSERT_EQ(plain.size(), one.size());
  for (std::size_t s = 0; s < plain.size(); ++s) {
    SCOPED_TRACE(plain[s].strategy);
    EXPECT_GT(plain[s].tally.recoveries, 0);
    EXPECT_EQ(plain[s].tally, one[s].tally);
    EXPECT_EQ(plain[s].requests, one[s].requests);
    EXPECT_EQ(plain[s].moves, one[s].moves);
    EXPECT_EQ(plain[s].bytes.kv, one[s].bytes.kv);
    EXPECT_EQ(plain[s].gpu_time.decode, one[s].gpu_time.decode);
    ASSERT_EQ(one[s].deployments.size(), 1u);
    EXPECT_EQ(one[s].deployments[0].tally, one[s].tally);
  }
}

// Node name -> pool name.
std::map<std::string, std::string> pool_of(const input::ScenarioSpec& spec) {
  std::map<std::string, std::string> out;
  for (const ClusterNode& n : spec.cluster.nodes) {
    if (n.kind == NodeKind::kGpu) out[n.name] = spec.pools[static_cast<std::size_t>(n.pool)].name;
  }
  return out;
}

TEST(Deployments, EveryRequestLivesAndMovesOnlyOnItsOwnPools) {
  for (std::uint64_t seed : {1u, 2u, 5u}) {
    const input::ScenarioSpec spec = load(two_models(seed));
    const std::map<std::string, std::string> pool = pool_of(spec);
    const std::vector<std::string> own = {"a", "b"};  // deployment -> its pool
    for (const RunResult& r : run(spec)) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + r.strategy);
      ASSERT_EQ(r.deployments.size(), 2u);
      std::set<std::uint64_t> ids;
      std::int64_t by_deployment[2] = {0, 0};
      for (const RequestRecord& q : r.requests) {
        EXPECT_TRUE(ids.insert(q.id).second) << "request " << q.id << " recorded twice";
        ASSERT_TRUE(q.deployment == 0 || q.deployment == 1);
        ++by_deployment[q.deployment];
        for (const std::string& node : {q.first_node, q.final_node}) {
          if (!node.empty()) {
            EXPECT_EQ(pool.at(node), own[q.deployment]) << "request " << q.id;
          }
        }
      }
      EXPECT_EQ(ids.size(), r.requests.size());
      EXPECT_GT(by_deployment[0], 0);
      EXPECT_GT(by_deployment[1], 0);
      std::int64_t moves = 0;
      for (const MoveRecord& m : r.moves) {
        EXPECT_EQ(m.deployment, r.requests.at(m.request).deployment);
        EXPECT_EQ(pool.at(m.to), own[m.deployment]) << "move of request " << m.request;
        ++moves;
      }
      EXPECT_GT(moves, 0);
      // The deployments' tallies are the run's, split.
      const RunTally& a = r.deployments[0].tally;
      const RunTally& b = r.deployments[1].tally;
      EXPECT_EQ(a.arrived, by_deployment[0]);
      EXPECT_EQ(b.arrived, by_deployment[1]);
      EXPECT_EQ(a.arrived + b.arrived, r.tally.arrived);
      EXPECT_EQ(a.completed + b.completed, r.tally.completed);
      EXPECT_EQ(a.failed + b.failed, r.tally.failed);
      EXPECT_EQ(a.unfinished + b.unfinished, r.tally.unfinished);
      EXPECT_EQ(a.recoveries + b.recoveries, r.tally.recoveries);
      EXPECT_EQ(a.migrations + b.migrations, r.tally.migrations);
      EXPECT_EQ(a.failed_moves + b.failed_moves, r.tally.failed_moves);
      EXPECT_EQ(a.ttft_s.size() + b.ttft_s.size(), r.tally.ttft_s.size());
      EXPECT_NEAR(a.delta_nll_sum + b.delta_nll_sum, r.tally.delta_nll_sum, 1e-9);
      // The summary says the same, per deployment.
      const reports::StrategyMetrics m = reports::strategy_metrics(spec, r);
      ASSERT_EQ(m.deployments.size(), 2u);
      EXPECT_EQ(m.deployments.at("qwen").model, "qwen2.5-1.5b");
      EXPECT_EQ(m.deployments.at("llama").model, "llama-3.1-8b");
      EXPECT_EQ(
          m.deployments.at("qwen").requests.arrived + m.deployments.at("llama").requests.arrived,
          m.requests.arrived);
      EXPECT_EQ(reports::from_json(reports::to_json(m)).deployments.at("llama").ttft.p99_s,
                m.deployments.at("llama").ttft.p99_s);
    }
  }
}

TEST(Deployments, OnlyADeploymentWithAPrefillPoolHandsItsRequestsOff) {
  json j = two_models(6);
  j["pools"] = {{{"name", "a-prefill"}, {"role", "prefill"}, {"nodes", {"gpu0"}}},
                {{"name", "a"}, {"role", "decode"}, {"nodes", {"gpu1", "gpu2"}}},
                {{"name", "b"}, {"role", "mixed"}, {"nodes", {"gpu3", "gpu4", "gpu5"}}}};
  j["deployments"][0]["pools"] = {"a-prefill", "a"};
  const input::ScenarioSpec spec = load(j);
  const std::map<std::string, std::string> pool = pool_of(spec);
  for (const RunResult& r : run(spec)) {
    SCOPED_TRACE(r.strategy);
    ASSERT_EQ(r.deployments.size(), 2u);
    const bool replay = r.strategy == "token_replay";  // decode-side prefill: no handoff
    EXPECT_EQ(r.deployments[0].tally.handoffs > 0, !replay);
    EXPECT_EQ(r.deployments[1].tally.handoffs, 0);
    for (const RequestRecord& q : r.requests) {
      if (q.first_node.empty()) continue;
      const std::string& first = pool.at(q.first_node);
      if (q.deployment == 1) {
        EXPECT_EQ(first, "b");
      } else {
        EXPECT_EQ(first, replay ? "a" : "a-prefill") << "request " << q.id;
      }
    }
    const reports::StrategyMetrics m = reports::strategy_metrics(spec, r);
    EXPECT_TRUE(m.deployments.at("qwen").handoffs.has_value());
    EXPECT_FALSE(m.deployments.at("llama").handoffs.has_value());
  }
}

TEST(Deployments, AFullKvMoveShipsItsOwnModelsKv) {
  json j = two_models(4);
  j["policies"]["strategies"] = {"full_kv"};
  const input::ScenarioSpec spec = load(j);
  const RunResult r = run(spec).at(0);
  int checked[2] = {0, 0};
  // A recovery ships the replica's KV (prefix_recompute when the replica is behind by the
  // tokens decoded since its last flush); a drain ships the live KV (full_kv).
  for (const MoveRecord& m : r.moves) {
    if (m.outcome != MoveOutcome::kDone || m.source.empty() ||
        (m.strategy != "full_kv" && m.strategy != "prefix_recompute")) {
      continue;
    }
    const cost_model::ModelSpec& model =
        spec.deployments[static_cast<std::size_t>(m.deployment)].model;
    EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(model, m.available_tokens).count)
        << "request " << m.request << " of " << model.name;
    ++checked[m.deployment];
  }
  EXPECT_GT(checked[0], 0);
  EXPECT_GT(checked[1], 0);
}

TEST(Deployments, TheDrawOfDeploymentsLeavesArrivalsAsTheyWere) {
  const input::ScenarioSpec spec = load(base(9));
  const Seconds horizon{600};
  const std::vector<RequestArrival> one = generate_requests(spec.workload, 9, horizon);
  const std::vector<RequestArrival> two =
      generate_requests(spec.workload, 9, horizon, {{0.3, {}, {}}, {0.7, {}, {}}});
  ASSERT_EQ(one.size(), two.size());
  std::size_t second = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].deployment, 0);
    EXPECT_EQ(one[i].arrival_ns, two[i].arrival_ns);
    EXPECT_EQ(one[i].prompt_tokens, two[i].prompt_tokens);
    EXPECT_EQ(one[i].output_tokens, two[i].output_tokens);
    second += two[i].deployment == 1;
  }
  // A binomial share: within 4 standard deviations of 0.7.
  const double n = static_cast<double>(one.size());
  EXPECT_NEAR(static_cast<double>(second) / n, 0.7, 4 * std::sqrt(0.21 / n));
}

TEST(Deployments, ADeploymentsOwnLengthsApplyToItsArrivalsOnly) {
  const input::ScenarioSpec spec = load(base(9));
  const Seconds horizon{600};
  TokenDist prompt;
  prompt.value = 3000;
  const std::vector<RequestArrival> one = generate_requests(spec.workload, 9, horizon);
  const std::vector<RequestArrival> two =
      generate_requests(spec.workload, 9, horizon, {{0.5, {}, {}}, {0.5, prompt, {}}});
  ASSERT_EQ(one.size(), two.size());
  std::size_t own = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].arrival_ns, two[i].arrival_ns);
    if (two[i].deployment == 1) {
      EXPECT_EQ(two[i].prompt_tokens, 3000);
      ++own;
    } else {
      EXPECT_EQ(two[i].prompt_tokens, one[i].prompt_tokens) << "the workload's draw, unchanged";
    }
    EXPECT_EQ(two[i].output_tokens, one[i].output_tokens);
  }
  EXPECT_GT(own, 0u);
}

}  // namespace
}  // namespace kvshift::sim
