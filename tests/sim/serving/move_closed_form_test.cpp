// Metamorphic tests of single moves: one request, one uncontended move, over a
// grid of bandwidths, latencies and contexts, for every strategy. The simulated
// move must equal the closed form to the nanosecond — written out by hand here
// (latency + 8·bytes/B, then the receiver's GPU work), not through the
// simulator's cost object — and agree with cost_model::latency(), which
// `kvshift cost` prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cost_model/latency.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

struct Case {
  std::string bandwidth;
  double bps;
  std::string latency;
  std::int64_t latency_ns;
  std::int64_t prompt;
};

std::string drain_scenario(const Case& c, const std::string& strategy) {
  return R"({
    "name": "closed-form", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": ")" +
         c.bandwidth + R"(", "latency": ")" + c.latency + R"("}]},
    "workload": {"arrival": "poisson", "rate": 10, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": )" +
         std::to_string(c.prompt) + R"(},
                 "output_tokens": {"distribution": "fixed", "value": 4000}},
    "serving": {"max_batch": 1},
    "events": [{"type": "drain", "at": "2s", "node": "gpu0"}],
    "policies": {"strategies": [")" +
         strategy + R"("]},
    "risk_kv": {"topology": "paper", "delta_nll": 0.002},
    "proxy_kv": {"proxy_model": "qwen2.5-0.5b", "retention": 0.3, "delta_nll": 0.01},
    "seed": 3, "duration": "60s"})";
}

std::vector<Case> grid() {
  std::vector<Case> out;
  const std::pair<std::string, double> bws[] = {
      {"100Mbps", 100e6}, {"1Gbps", 1e9}, {"10Gbps", 10e9}, {"100Gbps", 100e9}};
  const std::pair<std::string, std::int64_t> lats[] = {{"100us", 100'000}, {"10ms", 10'000'000}};
  for (const auto& [bw, bps] : bws) {
    for (const auto& [lat, ns] : lats) {
      for (std::int64_t prompt : {128, 512, 2048}) out.push_back({bw, bps, lat, ns, prompt});
    }
  }
  return out;
}

MoveRecord only_move(const input::ScenarioSpec& spec, const cost_model::ComputeCosts& compute) {
  const std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  EXPECT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].moves.size(), 1u) << runs[0].strategy;
  return runs[0].moves.at(0);
}

TEST(MoveClosedForm, EveryStrategyMatchesTheHandWrittenClosedFormToTheNanosecond) {
  for (const Case& c : grid()) {
    auto transfer = [&](std::int64_t bytes) {
      return c.latency_ns + from_seconds(8.0 * static_cast<double>(bytes) / c.bps).ns;
    };
    std::map<std::string, std::int64_t> expected;  // strategy -> ns, in tie-break order
    for (const char* strategy : {"full_kv", "token_replay", "risk_kv", "proxy_kv", "hybrid",
                                 "prefix_recompute", "adaptive"}) {
      const input::ScenarioSpec spec = input::load_scenario_text(drain_scenario(c, strategy), "t");
      const cost_model::RooflineCosts compute(spec.gpu);
      const MoveRecord m = only_move(spec, compute);
      ASSERT_EQ(m.outcome, MoveOutcome::kDone) << strategy;
      const std::int64_t t = m.context_tokens;
      EXPECT_GT(t, c.prompt);  // ProxyKV scoring shares the GPU, so t differs by a few tokens
      const cost_model::OmissionPlan& topo = spec.risk_kv->omission;
      const std::int64_t full = cost_model::kv_bytes(spec.model, t).count;
      expected["full_kv"] = transfer(full);
      expected["token_replay"] = transfer(4 * t) + from_seconds(compute.prefill(spec.model, t)).ns;
      expected["risk_kv"] =
          transfer(cost_model::storage(spec.model, topo, t, {}).kv_kept.count) +
          from_seconds(compute.reconstruct(spec.model, topo, t, 1, cost_model::DType::kF32)).ns;
      expected["proxy_kv"] = transfer(std::llround(0.3 * static_cast<double>(full)));
      // Hybrid: the best 16-token boundary s. The front's ids (4 bytes a token) go first; the
      // receiver prefills the front once they are in, while the rest of the KV follows them
      // on the wire: latency + ids + max(the rest's bytes, the front's prefill).
      expected["hybrid"] = expected["full_kv"];
      for (std::int64_t s = 16; s < t + 16; s += 16) {
        const std::int64_t front = std::min(s, t);
        const std::int64_t rest = cost_model::kv_bytes(spec.model, t - front).count;
        const std::int64_t ids_in = transfer(4 * front);
        const std::int64_t rest_ns =
            rest > 0 ? from_seconds(8.0 * static_cast<double>(rest) / c.bps).ns : 0;
        expected["hybrid"] = std::min(
            expected["hybrid"],
            ids_in + std::max(rest_ns, from_seconds(compute.prefill(spec.model, front)).ns));
      }
      const std::string label = std::string(strategy) + " at " + c.bandwidth + ", " + c.latency +
                                ", " + std::to_string(c.prompt) + " tokens";
      if (std::string(strategy) == "adaptive") {
        std::string best = "full_kv";
        for (const char* s : {"token_replay", "risk_kv", "proxy_kv", "hybrid"}) {
          if (expected[s] < expected[best]) best = s;
        }
        EXPECT_EQ(m.strategy, best) << label;
        EXPECT_EQ(m.end_ns - m.start_ns, expected[best]) << label;
      } else if (std::string(strategy) == "prefix_recompute") {
        // A migration reads the live KV: there is no tail to recompute.
        EXPECT_EQ(m.strategy, "full_kv") << label;
        EXPECT_EQ(m.end_ns - m.start_ns, expected["full_kv"]) << label;
        EXPECT_NE(m.fallback.find("no tail"), std::string::npos) << label << ": " << m.fallback;
      } else {
        EXPECT_EQ(m.strategy, strategy) << label;
        EXPECT_EQ(m.end_ns - m.start_ns, expected[strategy]) << label;
        EXPECT_TRUE(m.fallback.empty()) << label << ": " << m.fallback;
      }
      // Whatever runs, the ids of every token the receiver recomputes crossed the link.
      EXPECT_EQ(m.token_bytes, 4 * (m.front_tokens + m.tail_tokens)) << label;
      if (m.token_bytes > 0) {
        EXPECT_GE(m.end_ns - m.start_ns, transfer(m.token_bytes)) << label;
      }
      EXPECT_EQ(m.estimated_ns, m.end_ns - m.start_ns) << label << ": the plan's own estimate";
      // kvshift cost prints the same figures.
      const cost_model::StorageReport st = cost_model::storage(spec.model, topo, t, {});
      const cost_model::LatencyReport lr = cost_model::latency(
          spec.model, topo, t, st, {BitsPerSecond{c.bps}, Seconds{c.latency_ns * 1e-9}}, spec.gpu,
          compute, {0.3, cost_model::DType::kF32, {}, std::nullopt, true});
      for (const cost_model::Strategy st :
           {cost_model::Strategy::kFullKv, cost_model::Strategy::kTokenReplay,
            cost_model::Strategy::kRiskKv, cost_model::Strategy::kProxyKv,
            cost_model::Strategy::kHybrid}) {
        const std::string name = cost_model::strategy_name(st);
        EXPECT_EQ(round_to_ns(lr.move.at(st).value), expected[name]) << label << " " << name;
      }
    }
  }
}

// A recovery from a RISK-KV replica on a store, with the predictors shipped on demand from
// that store: kept KV and predictors share the store's link, then rebuild and tail replay.
std::string recovery_scenario(const std::string& bandwidth) {
  return R"({
    "name": "recovery-shipped-predictor", "model": "tinyllama-1.1b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}, {"name": "store", "kind": "storage", "capacity": "1TiB"}],
                "links": [{"a": "gpu0", "b": "store", "bandwidth": ")" +
         bandwidth + R"(", "latency": "1ms"},
                          {"a": "gpu1", "b": "store", "bandwidth": ")" +
         bandwidth + R"(", "latency": "1ms"}]},
    "workload": {"arrival": "poisson", "rate": 10, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": 700},
                 "output_tokens": {"distribution": "fixed", "value": 4000}},
    "serving": {"max_batch": 1},
    "protection": {"mode": "risk_kv", "placement": "storage", "store": "store",
                   "stream_every_tokens": 64},
    "events": [{"type": "node_failure", "at": "3s", "node": "gpu0", "detection_delay": "0s"}],
    "policies": {"strategies": ["risk_kv"]},
    "risk_kv": {"topology": "paper", "delta_nll": 0.02},
    "predictors": {"placement": "on_demand", "source": "store"},
    "seed": 1, "duration": "60s"})";
}

TEST(MoveClosedForm, RecoveryWithAShippedPredictorMatchesTheClosedForm) {
  for (const auto& [bw, bps] : {std::pair<std::string, double>{"1Gbps", 1e9}, {"25Gbps", 25e9}}) {
    const input::ScenarioSpec spec = input::load_scenario_text(recovery_scenario(bw), "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const MoveRecord m = only_move(spec, compute);
    ASSERT_EQ(m.outcome, MoveOutcome::kDone);
    ASSERT_EQ(m.strategy, "risk_kv");
    EXPECT_EQ(m.source, "store");
    const cost_model::OmissionPlan& topo = spec.risk_kv->omission;
    const std::int64_t avail = m.available_tokens, tail = m.tail_tokens;
    EXPECT_GT(avail, 0);
    EXPECT_EQ(avail + tail, m.context_tokens);
    const auto st = cost_model::storage(spec.model, topo, avail, {});
    const std::int64_t pred = cost_model::storage(spec.model, topo, 1, {cost_model::DType::kF32, 1})
                                  .predictor_bytes_total.count;
    EXPECT_EQ(m.predictor_bytes, pred);
    EXPECT_EQ(m.kv_bytes, st.kv_kept.count);
    EXPECT_EQ(m.token_bytes, 4 * tail) << "the tail's ids travel with the kept KV";
    const std::int64_t expected =
        1'000'000 +
        from_seconds(8.0 * static_cast<double>(st.kv_kept.count + pred + 4 * tail) / bps).ns +
        from_seconds(compute.reconstruct(spec.model, topo, avail, 1, cost_model::DType::kF32)).ns +
        (tail > 0 ? from_seconds(compute.extend(spec.model, avail, tail)).ns : 0);
    EXPECT_EQ(m.end_ns - m.start_ns, expected) << bw;
    EXPECT_EQ(m.estimated_ns, expected) << bw;
  }
}

// A recovery from a full-KV replica on a store that lags the request (it streams every
// 256 tokens over a 20 Mbps link, slower than the request grows): the replica holds a prefix, the
// receiver recomputes the tail on top of it.
std::string stale_replica_scenario(const std::string& strategy) {
  return R"({
    "name": "stale-replica", "model": "qwen2.5-1.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}, {"name": "store", "kind": "storage", "capacity": "1TiB"}],
                "links": [{"a": "gpu0", "b": "store", "bandwidth": "20Mbps", "latency": "1ms"},
                          {"a": "gpu1", "b": "store", "bandwidth": "10Gbps", "latency": "1ms"}]},
    "workload": {"arrival": "poisson", "rate": 10, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                 "output_tokens": {"distribution": "fixed", "value": 4000}},
    "serving": {"max_batch": 1},
    "protection": {"mode": "full", "placement": "storage", "store": "store",
                   "stream_every_tokens": 256},
    "events": [{"type": "node_failure", "at": "30s", "node": "gpu0", "detection_delay": "0s"}],
    "policies": {"strategies": [")" +
         strategy + R"("]},
    "seed": 1, "duration": "120s"})";
}

TEST(MoveClosedForm, AStaleReplicaShipsItsPrefixAndTheReceiverRecomputesTheTail) {
  auto wire = [](std::int64_t bytes) {
    return from_seconds(8.0 * static_cast<double>(bytes) / 10e9).ns;
  };
  for (const char* strategy : {"prefix_recompute", "full_kv", "hybrid"}) {
    const input::ScenarioSpec spec =
        input::load_scenario_text(stale_replica_scenario(strategy), "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const MoveRecord m = only_move(spec, compute);
    ASSERT_EQ(m.outcome, MoveOutcome::kDone) << strategy;
    EXPECT_EQ(m.trigger, MoveTrigger::kFailure);
    EXPECT_EQ(m.source, "store");
    const std::int64_t held = m.available_tokens + m.front_tokens, tail = m.tail_tokens;
    ASSERT_GT(tail, 0) << strategy << ": the case needs a replica that lags";
    EXPECT_EQ(held + tail, m.context_tokens) << strategy;
    const std::int64_t tail_ns = from_seconds(compute.extend(spec.model, held, tail)).ns;
    if (std::string(strategy) == "hybrid") {
      EXPECT_EQ(m.strategy, "hybrid");
      const std::int64_t front = from_seconds(compute.prefill(spec.model, m.front_tokens)).ns;
      EXPECT_GT(m.front_tokens, 0);
      EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(spec.model, m.available_tokens).count);
      // The ids of the front and of the tail go first; the front runs once they are in.
      EXPECT_EQ(m.token_bytes, 4 * (m.front_tokens + tail));
      EXPECT_EQ(m.end_ns - m.start_ns,
                1'000'000 + wire(m.token_bytes) + std::max(wire(m.kv_bytes), front) + tail_ns);
    } else {
      // full_kv cannot ship all of a stale replica: it is a prefix recompute, and says so.
      EXPECT_EQ(m.strategy, "prefix_recompute") << strategy;
      EXPECT_EQ(m.fallback.empty(), std::string(strategy) == "prefix_recompute") << m.fallback;
      EXPECT_EQ(m.front_tokens, 0);
      EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(spec.model, held).count);
      EXPECT_EQ(m.token_bytes, 4 * tail) << strategy << ": the tail's ids travel with the KV";
      EXPECT_EQ(m.end_ns - m.start_ns, 1'000'000 + wire(m.kv_bytes + m.token_bytes) + tail_ns)
          << strategy;
    }
    EXPECT_EQ(m.estimated_ns, m.end_ns - m.start_ns) << strategy << ": the plan's own estimate";
  }
}

}  // namespace
}  // namespace kvshift::sim
