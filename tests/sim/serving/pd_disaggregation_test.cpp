// Prefill/decode disaggregation and the transfer engine: a single handoff per
// strategy against the closed form written out here (to the nanosecond), the
// engine's descriptor cost, the in-flight cap, path stalls and failures, and
// the loader's answers to bad pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

struct Pd {
  std::string strategy = "full_kv";
  int requests = 1;
  std::int64_t prompt = 2048;
  std::string engine = "{}";
  std::string events = "[]";
  std::string serving = R"({"max_batch": 8})";
  std::string prefill_gpu;  // empty: the scenario's GPU
  int prefill_gpus = 1;
};

// One prefill node p0 and one decode node d0 over a 10 Gbps, 1 ms link.
std::string pd_scenario(const Pd& c) {
  const std::string gpu = c.prefill_gpu.empty() ? "" : R"(, "gpu": ")" + c.prefill_gpu + "\"";
  return R"({
    "name": "pd", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "p0", "gpus": )" +
         std::to_string(c.prefill_gpus) + R"(},
                          {"name": "d0"}],
                "links": [{"a": "p0", "b": "d0", "bandwidth": "10Gbps", "latency": "1ms"}]},
    "pools": [{"name": "prefill", "role": "prefill", "nodes": ["p0"])" +
         gpu + R"(},
              {"name": "decode", "role": "decode", "nodes": ["d0"]}],
    "transfer_engine": )" +
         c.engine + R"(,
    "workload": {"arrival": "poisson", "rate": 1000, "max_requests": )" +
         std::to_string(c.requests) + R"(,
                 "prompt_tokens": {"distribution": "fixed", "value": )" +
         std::to_string(c.prompt) + R"(},
                 "output_tokens": {"distribution": "fixed", "value": 50}},
    "serving": )" +
         c.serving + R"(,
    "events": )" +
         c.events + R"(,
    "policies": {"strategies": [")" +
         c.strategy + R"("]},
    "risk_kv": {"topology": "paper", "delta_nll": 0.002},
    "proxy_kv": {"proxy_model": "qwen2.5-0.5b", "retention": 0.3, "delta_nll": 0.01},
    "seed": 3, "duration": "120s"})";
}

RunResult run_one(const Pd& c) {
  const input::ScenarioSpec spec = input::load_scenario_text(pd_scenario(c), "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  return std::move(runs.at(0));
}

RunResult run_one_text(const std::string& text) {
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  return std::move(runs.at(0));
}

std::vector<MoveRecord> handoffs(const RunResult& run) {
  std::vector<MoveRecord> out;
  for (const MoveRecord& m : run.moves) {
    if (m.trigger == MoveTrigger::kHandoff) out.push_back(m);
  }
  return out;
}

TEST(PdDisaggregation, OneHandoffPerStrategyIsTheClosedFormAndLandsInTtft) {
  const std::int64_t p = 2048;
  const input::ScenarioSpec spec = input::load_scenario_text(pd_scenario({}), "t");
  const cost_model::RooflineCosts decode_gpu(spec.gpu);
  const cost_model::RooflineCosts prefill_gpu(cost_model::find_gpu("h200"));
  auto transfer = [](std::int64_t bytes) {
    return 1'000'000 + from_seconds(8.0 * static_cast<double>(bytes) / 10e9).ns;
  };
  const std::int64_t full = cost_model::kv_bytes(spec.model, p).count;
  const cost_model::OmissionPlan& topo = spec.risk_kv->omission;
  // Hybrid: the decode GPU prefills the first s tokens (s on a 16-token block boundary) once
  // their ids (4 bytes a token, sent first) are in, while the KV of the rest follows them;
  // the best s.
  std::int64_t hybrid = transfer(full);
  for (std::int64_t s = 16; s <= p; s += 16) {
    const std::int64_t rest = cost_model::kv_bytes(spec.model, p - s).count;
    const std::int64_t rest_ns =
        rest > 0 ? from_seconds(8.0 * static_cast<double>(rest) / 10e9).ns : 0;
    hybrid =
        std::min(hybrid, transfer(4 * s) +
                             std::max(rest_ns, from_seconds(decode_gpu.prefill(spec.model, s)).ns));
  }
  ASSERT_LT(hybrid, transfer(full)) << "the case must split the move";
  const std::map<std::string, std::int64_t> expected = {
      {"hybrid", hybrid},
      {"full_kv", transfer(full)},
      {"risk_kv",
       transfer(cost_model::storage(spec.model, topo, p, {}).kv_kept.count) +
           from_seconds(decode_gpu.reconstruct(spec.model, topo, p, 1, cost_model::DType::kF32))
               .ns},
      {"proxy_kv", transfer(std::llround(0.3 * static_cast<double>(full)))},
  };
  for (const auto& [strategy, handoff_ns] : expected) {
    Pd c;
    c.strategy = strategy;
    c.prefill_gpu = "h200";  // heterogeneous: prefill on an H200, decode on the scenario's GPU
    const RunResult run = run_one(c);
    const std::vector<MoveRecord> h = handoffs(run);
    ASSERT_EQ(h.size(), 1u) << strategy;
    EXPECT_EQ(h[0].outcome, MoveOutcome::kDone) << strategy;
    EXPECT_EQ(h[0].strategy, strategy) << h[0].fallback;
    EXPECT_EQ(h[0].from, "p0");
    EXPECT_EQ(h[0].to, "d0");
    EXPECT_EQ(h[0].end_ns - h[0].start_ns, handoff_ns) << strategy;
    EXPECT_EQ(h[0].estimated_ns, handoff_ns) << strategy << ": the plan's own estimate";
    const RequestRecord& r = run.requests.at(0);
    ASSERT_EQ(r.outcome, RequestOutcome::kCompleted);
    EXPECT_EQ(r.first_node, "p0");
    EXPECT_EQ(r.final_node, "d0");
    const std::int64_t prefill = from_seconds(prefill_gpu.prefill(spec.model, p)).ns;
    if (strategy != "proxy_kv") {  // ProxyKV's handoff waits for the proxy's scores
      EXPECT_EQ(r.first_token_ns - r.arrival_ns, prefill + handoff_ns) << strategy;
    } else {
      EXPECT_GE(r.first_token_ns - r.arrival_ns, prefill + handoff_ns);
    }
  }
}

TEST(PdDisaggregation, TokenReplayIsDecodeSidePrefillWithNoHandoff) {
  Pd c;
  c.strategy = "token_replay";
  const RunResult run = run_one(c);
  EXPECT_TRUE(handoffs(run).empty());
  const RequestRecord& r = run.requests.at(0);
  EXPECT_EQ(r.first_node, "d0");
  const input::ScenarioSpec spec = input::load_scenario_text(pd_scenario(c), "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  EXPECT_EQ(r.first_token_ns - r.arrival_ns, from_seconds(compute.prefill(spec.model, 2048)).ns);
}

TEST(PdDisaggregation, BlockSizeChangesTheHandoffByExactlyTheDescriptorCost) {
  // A 5k-token pull at block size 16 vs 64: ceil(T/b) blocks x 28 layers x {K, V} descriptors.
  const std::string engine = R"({"setup": "3ms", "per_block": "4us"})";
  std::map<int, std::int64_t> took;
  for (int block : {16, 64}) {
    Pd c;
    c.prompt = 5000;
    c.engine = engine;
    c.serving = R"({"max_batch": 8, "kv_block_tokens": )" + std::to_string(block) + "}";
    const std::vector<MoveRecord> h = handoffs(run_one(c));
    ASSERT_EQ(h.size(), 1u);
    took[block] = h[0].end_ns - h[0].start_ns;
  }
  const std::int64_t d16 = (5000 + 15) / 16 * 28 * 2, d64 = (5000 + 63) / 64 * 28 * 2;
  EXPECT_EQ(d16, 17528);
  EXPECT_EQ(took[16] - took[64], (d16 - d64) * 4000);
  Pd ideal;
  ideal.prompt = 5000;
  const std::vector<MoveRecord> h = handoffs(run_one(ideal));
  EXPECT_EQ(took[64] - (h.at(0).end_ns - h.at(0).start_ns), 3'000'000 + d64 * 4000)
      << "setup + descriptors over the ideal link";
}

TEST(PdDisaggregation, WithACapOfOneHandoffsToOneDecodeNodeSerialize) {
  for (int cap : {0, 1, 2}) {
    Pd c;
    c.requests = 12;
    c.prefill_gpus = 4;
    c.engine = R"({"max_inflight_per_destination": )" + std::to_string(cap) + "}";
    const RunResult run = run_one(c);
    std::vector<MoveRecord> h = handoffs(run);
    ASSERT_EQ(h.size(), 12u) << "every handoff ends exactly once";
    std::map<std::uint64_t, int> per_request;
    for (const MoveRecord& m : h) {
      EXPECT_EQ(m.outcome, MoveOutcome::kDone);
      ++per_request[m.request];
    }
    EXPECT_EQ(per_request.size(), 12u);
    // Most transfers in flight at once into d0 (each spans start .. start + transfer_ns).
    std::vector<std::pair<std::int64_t, int>> edges;
    for (const MoveRecord& m : h) {
      edges.emplace_back(m.start_ns, +1);
      edges.emplace_back(m.start_ns + m.transfer_ns, -1);
    }
    std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
    int now = 0, most = 0;
    for (const auto& [t, d] : edges) most = std::max(most, now += d);
    if (cap > 0) {
      EXPECT_LE(most, cap);
    } else {
      EXPECT_GT(most, 2) << "without a cap the four prefill GPUs hand off together";
    }
    for (const RequestRecord& r : run.requests) EXPECT_EQ(r.outcome, RequestOutcome::kCompleted);
  }
}

TEST(PdDisaggregation, AStalledHandoffTimesOutAndFallsBackToDecodeSidePrefill) {
  Pd c;
  c.engine = R"({"stall_timeout": "2s"})";
  c.events =
      R"([{"type": "path_stall", "at": "0s", "from": "p0", "to": "d0", "repair_after": "100s"}])";
  const RunResult run = run_one(c);
  const std::vector<MoveRecord> h = handoffs(run);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].outcome, MoveOutcome::kFailed);
  EXPECT_NE(h[0].note.find("timed out after 2000.000 ms"), std::string::npos) << h[0].note;
  EXPECT_EQ(h[0].end_ns - h[0].start_ns, 2'000'000'000);
  EXPECT_EQ(h[1].outcome, MoveOutcome::kDone);
  EXPECT_EQ(h[1].strategy, "token_replay");
  EXPECT_NE(h[1].fallback.find("handoff from the prefill GPU failed"), std::string::npos);
  EXPECT_EQ(h[1].stall_ns, h[1].end_ns - h[0].start_ns) << "the timeout counts in its latency";
  EXPECT_EQ(run.requests.at(0).outcome, RequestOutcome::kCompleted);
  EXPECT_GT(run.requests.at(0).first_token_ns, 2'000'000'000);

  Pd hang = c;  // no timeout: the transfer waits for the stall to clear
  hang.engine = "{}";
  hang.events =
      R"([{"type": "path_stall", "at": "0s", "from": "p0", "to": "d0", "repair_after": "5s"}])";
  const std::vector<MoveRecord> waited = handoffs(run_one(hang));
  ASSERT_EQ(waited.size(), 1u);
  EXPECT_EQ(waited[0].outcome, MoveOutcome::kDone);
  EXPECT_GE(waited[0].end_ns, 5'000'000'000);
}

TEST(PdDisaggregation, AStallCatchesATransferInFlightAndResendsItWholeOnceItClears) {
  const RunResult clean = run_one({});
  const MoveRecord free_run = handoffs(clean).at(0);
  const std::int64_t start = free_run.start_ns, transfer = free_run.end_ns - free_run.start_ns;
  ASSERT_GT(transfer, 10'000'000) << "the case needs a transfer still in flight 5 ms in";
  // 5 ms into the transfer, on a whole microsecond (the scenario's text says "…us").
  const std::int64_t stall_us = (start + 5'000'000) / 1000, stall_ns = stall_us * 1000;
  auto at = [](std::int64_t us) { return std::to_string(us) + "us"; };
  const std::int64_t stall = stall_us;

  Pd timed;  // with a timeout the hung transfer fails that long after the stall caught it
  timed.engine = R"({"stall_timeout": "1s"})";
  timed.events = R"([{"type": "path_stall", "at": ")" + at(stall) +
                 R"(", "from": "p0", "to": "d0", "repair_after": "100s"}])";
  const std::vector<MoveRecord> failed = handoffs(run_one(timed));
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].outcome, MoveOutcome::kFailed);
  EXPECT_EQ(failed[0].start_ns, start);
  EXPECT_EQ(failed[0].end_ns, stall_ns + 1'000'000'000) << failed[0].note;
  EXPECT_EQ(failed[1].strategy, "token_replay") << "decode-side prefill after the timeout";

  Pd held;  // without one it waits for the repair and is sent again from its first byte
  held.events = R"([{"type": "path_stall", "at": ")" + at(stall) +
                R"(", "from": "p0", "to": "d0", "repair_after": "2s"}])";
  const std::vector<MoveRecord> resent = handoffs(run_one(held));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].outcome, MoveOutcome::kDone);
  EXPECT_EQ(resent[0].end_ns, stall_ns + 2'000'000'000 + transfer);
}

// Replica streams are KV transfers too: they pay the engine and meet path faults.
std::string streamed(const std::string& engine, const std::string& events) {
  return R"({
    "name": "streamed", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}, {"name": "store", "kind": "storage", "capacity": "1TiB"}],
                "links": [{"a": "gpu0", "b": "store", "bandwidth": "10Gbps", "latency": "1ms"},
                          {"a": "gpu1", "b": "store", "bandwidth": "10Gbps", "latency": "1ms"}]},
    "workload": {"arrival": "poisson", "rate": 10, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                 "output_tokens": {"distribution": "fixed", "value": 2000}},
    "serving": {"max_batch": 1},
    "protection": {"mode": "full", "placement": "storage", "store": "store", "stream_every_tokens": 64},
    "transfer_engine": )" +
         engine + R"(,
    "events": [{"type": "node_failure", "at": "5s", "node": "gpu0", "detection_delay": "0s"})" +
         events + R"(],
    "policies": {"strategies": ["full_kv"]},
    "seed": 1, "duration": "120s"})";
}

TEST(PdDisaggregation, ReplicaStreamsPayTheEngineAndMeetPathFaults) {
  auto recovery = [](const std::string& engine, const std::string& events) {
    const RunResult run = run_one_text(streamed(engine, events));
    EXPECT_EQ(run.moves.size(), 1u);
    return std::pair{run.moves.at(0), run.bytes.replica_stream};
  };
  const auto [clean, clean_bytes] = recovery("{}", "");
  EXPECT_EQ(clean.source, "store");
  EXPECT_GT(clean_bytes, 0);
  EXPECT_GT(clean.kv_bytes, 0);
  // A failed path to the store loses every flush from gpu0: the store holds no KV to recover
  // from, only the token ids (gpu1 then streams it all again over its own path).
  const auto [cut, cut_bytes] =
      recovery("{}", R"(, {"type": "path_failure", "at": "0s", "from": "gpu0", "to": "store"})");
  EXPECT_EQ(cut.strategy, "token_replay");
  EXPECT_EQ(cut.kv_bytes, 0);
  EXPECT_EQ(cut_bytes, clean_bytes);
  // Engine costs delay each flush: 1 s per descriptor keeps every flush in the engine at 5 s.
  const auto [slow, slow_bytes] = recovery(R"({"per_block": "1s"})", "");
  EXPECT_EQ(slow_bytes, 0);
  EXPECT_EQ(slow.strategy, "token_replay");
  // A stall without a timeout holds the flushes until it clears, then they land.
  const auto [held, held_bytes] = recovery(
      "{}",
      R"(, {"type": "path_stall", "at": "0s", "from": "gpu0", "to": "store", "repair_after": "1s"})");
  EXPECT_EQ(held.source, "store");
  EXPECT_EQ(held_bytes, clean_bytes);
}

TEST(PdDisaggregation, AFailedPathFailsTheHandoffAtOnce) {
  Pd c;
  c.events = R"([{"type": "path_failure", "at": "0s", "from": "p0", "to": "d0"}])";
  const RunResult run = run_one(c);
  const std::vector<MoveRecord> h = handoffs(run);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].outcome, MoveOutcome::kFailed);
  EXPECT_EQ(h[0].end_ns, h[0].start_ns);
  EXPECT_EQ(h[1].strategy, "token_replay");
  EXPECT_EQ(run.requests.at(0).outcome, RequestOutcome::kCompleted);
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(PdDisaggregation, ADecodeNodeLostMidHandoffIsHandedElsewhereFromThePrefillGpu) {
  std::string text = pd_scenario({});
  text = replaced(text, R"({"name": "d0"}],)", R"({"name": "d0"}, {"name": "d1"}],)");
  text = replaced(text, R"("bandwidth": "10Gbps", "latency": "1ms"}])",
                  R"("bandwidth": "100Mbps", "latency": "1ms"},
                     {"a": "p0", "b": "d1", "bandwidth": "100Mbps", "latency": "1ms"}])");
  text = replaced(text, R"("nodes": ["d0"])", R"("nodes": ["d0", "d1"])");
  text = replaced(text, R"("events": [])",
                  R"("events": [{"type": "node_failure", "at": "3s", "node": "d0"}])");
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
  const std::vector<MoveRecord> h = handoffs(run);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].to, "d0");
  EXPECT_EQ(h[0].outcome, MoveOutcome::kFailed);
  EXPECT_EQ(h[1].to, "d1");
  EXPECT_EQ(h[1].outcome, MoveOutcome::kDone);
  EXPECT_EQ(h[1].strategy, "full_kv") << "the prefill GPU still held the KV";
  EXPECT_EQ(h[1].source, "p0");
  EXPECT_EQ(run.requests.at(0).outcome, RequestOutcome::kCompleted);
}

std::string problems(const std::string& text) {
  const input::ScenarioLoad load = input::try_load_scenario_text(text, "t");
  std::string all;
  for (const std::string& p : load.problems) all += p + "\n";
  return all;
}

TEST(PdDisaggregation, BadPoolsAndEnginesNameTheField) {
  const std::string good = pd_scenario({});
  EXPECT_EQ(problems(good), "");
  EXPECT_NE(problems(replaced(good, R"("nodes": ["d0"])", R"("nodes": ["d9"])"))
                .find("/pools/1/nodes/0: unknown node \"d9\""),
            std::string::npos);
  EXPECT_NE(problems(replaced(good, R"("nodes": ["d0"])", R"("nodes": [])"))
                .find("/pools/1: the pool has no GPU"),
            std::string::npos);
  EXPECT_NE(problems(replaced(good, R"("role": "decode")", R"("role": "prefill")"))
                .find("a prefill pool needs a decode or mixed pool"),
            std::string::npos);
  EXPECT_NE(problems(replaced(good, R"(, "nodes": ["d0"])", R"(, "nodes": ["p0"])"))
                .find("already in pool \"prefill\""),
            std::string::npos);
  Pd zero;
  zero.serving = R"({"kv_block_tokens": 0})";
  EXPECT_NE(problems(pd_scenario(zero)).find("/serving/kv_block_tokens"), std::string::npos);
  Pd neg;
  neg.engine = R"({"max_inflight_per_destination": -1})";
  EXPECT_NE(problems(pd_scenario(neg)).find("/transfer_engine/max_inflight_per_destination"),
            std::string::npos);
  Pd path;
  path.events = R"([{"type": "path_stall", "at": "1s", "from": "p0", "to": "x"}])";
  EXPECT_NE(problems(pd_scenario(path)).find("/events/0/to: unknown node \"x\""),
            std::string::npos);
}

}  // namespace
}  // namespace kvshift::sim
