// One GPU of a node fails while the node stays up: its requests recover from their
// replicas — over the host link when the replica is in the node's own host DRAM
// (placement "local"), over the network from another node's — and the node's other
// GPU carries on. Replicas book room in host DRAM and never overfill it; a request
// with no room runs unprotected, counted.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

struct Knobs {
  std::string placement = "local";
  std::string event = "gpu_failure";
  std::string host_memory = "64GiB";
  int requests = 1;
  std::string strategy = "full_kv";
};

std::string scenario(const Knobs& k) {
  const std::string gpu_field = k.event == "gpu_failure" ? R"(, "gpu": 0)" : "";
  return R"({
    "name": "gpu-failure", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"node": {"gpus": 2, "host_memory": ")" +
         k.host_memory + R"("},
                "nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "10Gbps", "latency": "1ms"}]},
    "workload": {"arrival": "poisson", "rate": 50, "max_requests": )" +
         std::to_string(k.requests) + R"(,
                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                 "output_tokens": {"distribution": "fixed", "value": 3000}},
    "serving": {"max_batch": 4},
    "protection": {"mode": "full", "placement": ")" +
         k.placement + R"(", "stream_every_tokens": 64},
    "events": [{"type": ")" +
         k.event + R"(", "at": "3s", "node": "gpu0")" + gpu_field + R"(}],
    "policies": {"strategies": [")" +
         k.strategy + R"("]},
    "seed": 2, "duration": "600s"})";
}

RunResult run(const Knobs& k) {
  const input::ScenarioSpec spec = input::load_scenario_text(scenario(k), "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  EXPECT_EQ(runs.size(), 1u);
  return std::move(runs.at(0));
}

TEST(GpuFailure, ALocalReplicaRecoversOverTheHostLinkAndARemoteOneOverTheNetwork) {
  for (const char* placement : {"local", "next_node"}) {
    Knobs k;
    k.placement = placement;
    const input::ScenarioSpec spec = input::load_scenario_text(scenario(k), "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult r = run(k);
    ASSERT_EQ(r.moves.size(), 1u) << placement;
    const MoveRecord& m = r.moves[0];
    ASSERT_EQ(m.outcome, MoveOutcome::kDone) << placement;
    EXPECT_EQ(m.trigger, MoveTrigger::kFailure);
    EXPECT_EQ(m.from, "gpu0");
    EXPECT_EQ(m.to, "gpu0") << "the node's other GPU is up and empty: the first destination";
    const bool local = std::string(placement) == "local";
    EXPECT_EQ(m.source, local ? "gpu0" : "gpu1");
    const std::int64_t held = m.available_tokens, tail = m.tail_tokens;
    EXPECT_EQ(held + tail, m.context_tokens);
    EXPECT_LT(tail, 64) << "the replica lags by less than one stream interval";
    EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(spec.model, held).count);
    EXPECT_EQ(m.token_bytes, 4 * tail) << "the tail is recomputed from its ids";
    const double bits = 8.0 * static_cast<double>(m.kv_bytes + m.token_bytes);
    const std::int64_t wire = local ? from_seconds(bits / spec.gpu.host_link.value).ns
                                    : 1'000'000 + from_seconds(bits / 10e9).ns;
    const std::int64_t tail_ns =
        tail > 0 ? from_seconds(compute.extend(spec.model, held, tail)).ns : 0;
    EXPECT_EQ(m.end_ns - m.start_ns, wire + tail_ns) << placement;
    EXPECT_EQ(m.estimated_ns, wire + tail_ns) << placement << ": the plan's own estimate";
    ASSERT_EQ(r.requests.size(), 1u);
    EXPECT_EQ(r.requests[0].outcome, RequestOutcome::kCompleted);
    EXPECT_EQ(r.unprotected, 0);
  }
}

TEST(GpuFailure, TheNodesOtherGpuCarriesOnAndEveryRequestEndsOnce) {
  Knobs k;
  k.requests = 8;  // max_batch 4 on each of 4 GPUs: all run at once, on every GPU
  const RunResult r = run(k);
  std::int64_t completed = 0;
  for (const RequestRecord& q : r.requests) completed += q.outcome == RequestOutcome::kCompleted;
  EXPECT_EQ(completed, 8);
  EXPECT_EQ(r.tally.completed, 8);
  ASSERT_FALSE(r.moves.empty());
  std::set<std::uint64_t> moved;
  for (const MoveRecord& m : r.moves) {
    EXPECT_EQ(m.outcome, MoveOutcome::kDone);
    EXPECT_TRUE(moved.insert(m.request).second) << "each lost request recovers once";
  }
  EXPECT_LT(moved.size(), 8u) << "only the failed GPU's requests move, not the node's";
}

TEST(GpuFailure, ANodeFailureTakesItsLocalReplicasWithIt) {
  Knobs k;
  k.event = "node_failure";
  const RunResult r = run(k);
  ASSERT_EQ(r.moves.size(), 1u);
  const MoveRecord& m = r.moves[0];
  ASSERT_EQ(m.outcome, MoveOutcome::kDone);
  EXPECT_EQ(m.to, "gpu1");
  EXPECT_EQ(m.source, "") << "the replica was in the failed node's DRAM: replay from token ids";
  EXPECT_EQ(m.strategy, "token_replay") << m.fallback;
  EXPECT_FALSE(m.fallback.empty()) << "full_kv could not run, and the record says so";
}

TEST(GpuFailure, ReplicasNeverOverfillHostMemoryAndTheRestRunUnprotected) {
  // One request's full replica: 4000 tokens of qwen2.5-1.5b KV (28 KiB/token) ~ 109 MiB.
  // 300 MiB of host DRAM holds two of them per node, so of 8 requests some wait.
  Knobs k;
  k.requests = 8;
  k.host_memory = "300MiB";
  k.placement = "next_node";
  const RunResult tight = run(k);  // ReplicaStore::book throws if a node ever overfills
  EXPECT_GT(tight.unprotected, 0);
  EXPECT_LE(tight.replica_room_peak_share, 1.0);
  EXPECT_GT(tight.replica_room_peak_share, 0.5);
  k.host_memory = "64GiB";
  const RunResult roomy = run(k);
  EXPECT_EQ(roomy.unprotected, 0);
  EXPECT_EQ(tight.tally.completed + tight.tally.failed + tight.tally.unfinished, 8);
  EXPECT_EQ(roomy.tally.completed, 8);
}

// Every node fails and none is repaired: nothing could ever serve what is left, so those
// requests end failed with the reason (they were counted as unfinished, a lower bound that
// suggested they might still finish); with one node repaired they are unfinished again.
std::string all_fail_scenario(bool repair) {
  const std::string repair_after = repair ? R"(, "repair_after": "1s")" : "";
  return R"({
    "name": "all-fail", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "10Gbps", "latency": "1ms"}]},
    "workload": {"arrival": "poisson", "rate": 4, "max_requests": 40,
                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                 "output_tokens": {"distribution": "fixed", "value": 3000}},
    "serving": {"max_batch": 4},
    "protection": {"mode": "full", "placement": "next_node", "stream_every_tokens": 64},
    "events": [{"type": "node_failure", "at": "3s", "node": "gpu0", "detection_delay": "0s"},
               {"type": "node_failure", "at": "3s", "node": "gpu1", "detection_delay": "0s")" +
         repair_after + R"(}],
    "policies": {"strategies": ["full_kv"]},
    "seed": 2, "duration": "20s"})";
}

TEST(GpuFailure, WithEveryGpuDownForGoodWhatIsLeftFailsWithAReason) {
  const input::ScenarioSpec spec = input::load_scenario_text(all_fail_scenario(false), "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  const RunResult down = run_scenario(spec, compute, {false, {}}).at(0);
  EXPECT_EQ(down.tally.unfinished, 0);
  EXPECT_GT(down.tally.failed, 0);
  EXPECT_EQ(down.tally.arrived, down.tally.completed + down.tally.failed);
  for (const RequestRecord& r : down.requests) {
    if (r.outcome != RequestOutcome::kFailed) continue;
    EXPECT_NE(r.reason.find("every GPU of its deployment was down"), std::string::npos) << r.reason;
  }
  for (const MoveRecord& m : down.moves) {
    EXPECT_NE(m.outcome, MoveOutcome::kUnfinished) << "request " << m.request << ": " << m.note;
  }
  const input::ScenarioSpec back = input::load_scenario_text(all_fail_scenario(true), "t");
  const RunResult repaired = run_scenario(back, compute, {false, {}}).at(0);
  for (const RequestRecord& r : repaired.requests) {
    EXPECT_EQ(r.reason.find("every GPU of its deployment was down"), std::string::npos) << r.reason;
  }
}

}  // namespace
}  // namespace kvshift::sim
