// The two recompute strategies: prefix_recompute (a stale prefix shipped, the tail
// recomputed on top of it) and hybrid (the back shipped while the front is
// recomputed), and the tail prefill they price. Exact where the arithmetic is
// exact; properties against brute force over every split elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cost_model/compute_costs.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/storage.hpp"

namespace kvshift::cost_model {
namespace {

struct Fixture {
  ModelSpec model = find_model("qwen2.5-1.5b");
  OmissionPlan topology = OmissionPlan::parse("paper", model);
  MoveMethods methods{&model, &topology, DType::kF32, 0.3, 0.002, 0.01, {}};
  RooflineCosts compute{find_gpu("h100")};
};

MoveRoute network(double bps, double latency_s) {
  MoveRoute r;
  r.data = MoveRoute::Leg::kNetwork;
  r.data_path = {BitsPerSecond{bps}, Seconds{latency_s}};
  return r;
}

// a + b·t + c·t² seconds: the default extend() must be exact to one token's marginal cost.
class QuadraticCosts final : public ComputeCosts {
 public:
  static constexpr double a = 1e-3, b = 2e-6, c = 3e-10;
  Seconds prefill(const ModelSpec&, std::int64_t t) const override {
    const double x = static_cast<double>(t);
    return {a + b * x + c * x * x};
  }
  Seconds decode_step(const ModelSpec&, std::int64_t, std::int64_t) const override { return {}; }
  Seconds reconstruct(const ModelSpec&, const OmissionPlan&, std::int64_t, std::int64_t,
                      DType) const override {
    return {};
  }
  Seconds proxy_score(const ModelSpec&, const ModelSpec&, std::int64_t) const override {
    return {};
  }
  Seconds prune(const ModelSpec&, std::int64_t, double) const override { return {}; }
  std::vector<OpSource> sources() const override { return {}; }
};

TEST(Extend, TheDefaultIsTheIncrementPlusOnePassExactForAQuadratic) {
  const QuadraticCosts q;
  const ModelSpec m = find_model("qwen2.5-0.5b");
  for (std::int64_t p : {0, 1, 100, 4000}) {
    for (std::int64_t r : {1, 7, 512}) {
      const double x = static_cast<double>(p), y = static_cast<double>(r);
      // True cost of r new tokens over p: a + b·r + c·((p+r)² − p²); the default adds b + c.
      const double exact = q.a + q.b * y + q.c * ((x + y) * (x + y) - x * x);
      const double extra = p == 0 ? 0 : q.b + q.c;
      EXPECT_NEAR(q.extend(m, p, r).value, exact + extra, 1e-15) << p << " + " << r;
    }
  }
  EXPECT_EQ(q.extend(m, 100, 0).value, 0);
}

TEST(Extend, RooflineAtNoPrefixIsThePrefillAndGrowsWithThePrefix) {
  Fixture f;
  for (std::int64_t t : {1, 64, 1000, 32768}) {
    EXPECT_EQ(f.compute.extend(f.model, 0, t).value, f.compute.prefill(f.model, t).value) << t;
  }
  double previous = 0;
  for (std::int64_t p : {0, 512, 4096, 32768, 131072}) {
    const double now = f.compute.extend(f.model, p, 256).value;
    EXPECT_GT(now, previous) << "a longer prefix means more attention for the tail: " << p;
    previous = now;
  }
  // The tail's extra work over a prefill of its own: its attention to the prefix, 2·P·R
  // query-key pairs (compute-bound here: the prefix's KV read is far cheaper).
  const std::int64_t p = 3000, r = 1000;
  const GpuSpec& gpu = f.compute.gpu();
  const double pairs = 2.0 * f.model.layers * f.model.q_heads * f.model.head_dim * 2.0 * p * r;
  const double extra = pairs / (gpu.peak_dense_fp16.value * gpu.attention_efficiency);
  EXPECT_NEAR(f.compute.extend(f.model, p, r).value - f.compute.prefill(f.model, r).value, extra,
              1e-9 * extra);
}

TEST(PrefixRecompute, ShipsTheHeldPrefixAndRecomputesTheTailOnTopOfIt) {
  Fixture f;
  const MoveState stale{4000, 3000, SourceKv::kFull, true, false};
  const MovePlan p = plan_move(Strategy::kPrefixRecompute, f.methods, stale);
  ASSERT_TRUE(p.feasible());
  EXPECT_EQ(p.strategy, Strategy::kPrefixRecompute);
  EXPECT_TRUE(p.note.empty()) << p.note;
  EXPECT_EQ(p.kv, kv_bytes(f.model, 3000));
  EXPECT_EQ(p.kv_tokens, 3000);
  EXPECT_EQ(p.replay_tokens, 1000);
  EXPECT_EQ(p.replay_prefix(), 3000);
  EXPECT_EQ(p.tokens, Bytes{4 * 1000}) << "the tail's ids travel with the prefix's KV";
  const MoveEstimate e = estimate_move(p, f.methods, network(10e9, 1e-3), 0, f.compute);
  EXPECT_EQ(e.transfer_ns,
            1'000'000 + round_to_ns(8.0 * (3000.0 * 2 * 28 * 2 * 128 * 2 + 4000) / 10e9));
  EXPECT_EQ(e.compute_ns, round_to_ns(f.compute.extend(f.model, 3000, 1000).value));
  // full_kv cannot ship all of a stale prefix: it runs as prefix_recompute and says so.
  const MovePlan full = plan_move(Strategy::kFullKv, f.methods, stale);
  EXPECT_EQ(full.strategy, Strategy::kPrefixRecompute);
  EXPECT_NE(full.note.find("3000 of 4000"), std::string::npos) << full.note;
  EXPECT_EQ(full.kv, p.kv);
  // A complete source leaves no tail: prefix_recompute is a full transfer and says so.
  const MovePlan whole =
      plan_move(Strategy::kPrefixRecompute, f.methods, {4000, 4000, SourceKv::kFull, true, false});
  EXPECT_EQ(whole.strategy, Strategy::kFullKv);
  EXPECT_NE(whole.note.find("no tail"), std::string::npos) << whole.note;
  // Only the full KV is a prefix to recompute from.
  EXPECT_FALSE(plan_move(Strategy::kPrefixRecompute, f.methods,
                         {4000, 3000, SourceKv::kKeptLayers, true, true})
                   .feasible());
  EXPECT_FALSE(
      plan_move(Strategy::kHybrid, f.methods, {4000, 4000, SourceKv::kKeptTokens, true, true})
          .feasible());
}

// Every split at a block boundary, priced by the estimator: the brute-force optimum.
std::int64_t best_split_ns(const Fixture& f, const MovePlan& unsplit, const MoveRoute& route,
                           std::int64_t backlog) {
  const std::int64_t held = unsplit.kv_tokens, block = f.methods.engine.block_tokens;
  std::int64_t best = estimate_move(unsplit, f.methods, route, backlog, f.compute).total_ns();
  for (std::int64_t s = block; s < held + block; s += block) {
    MovePlan p = unsplit;
    p.front_tokens = std::min(s, held);
    p.kv_tokens = held - p.front_tokens;
    p.kv = kv_bytes(f.model, p.kv_tokens);
    p.descriptors = kv_descriptors(f.methods.engine, p.kv_tokens, f.model.layers);
    if (p.kv_tokens == 0) p.front_tokens += p.replay_tokens, p.replay_tokens = 0;
    p.tokens = Bytes{4 * (p.front_tokens + p.replay_tokens)};  // the receiver needs their ids
    best = std::min(best, estimate_move(p, f.methods, route, backlog, f.compute).total_ns());
  }
  return best;
}

TEST(Hybrid, TheSplitIsTheBruteForceOptimumAndNeverLosesToFullOrReplay) {
  Fixture f;
  f.methods.engine = {Seconds{2e-3}, Seconds{2e-6}, 16};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_bw(std::log(1e8), std::log(4e11));
  std::uniform_int_distribution<std::int64_t> tokens(100, 6000), backlog(0, 200'000'000);
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t t = tokens(rng), queue = trial % 3 == 0 ? 0 : backlog(rng);
    const MoveRoute route = network(std::exp(log_bw(rng)), trial % 2 ? 1e-3 : 20e-6);
    const MoveState st{t, t - (trial % 4 == 0 ? t / 5 : 0), SourceKv::kFull, true, true};
    const MovePlan unsplit = plan_move(Strategy::kHybrid, f.methods, st);
    const MovePlan p = balance_hybrid(unsplit, f.methods, route, queue, f.compute);
    const std::string label = std::to_string(t) + " tokens at " +
                              std::to_string(route.data_path.bandwidth.value) + " bps, queue " +
                              std::to_string(queue) + " ns";
    EXPECT_EQ(p.strategy, Strategy::kHybrid);
    EXPECT_EQ(p.front_tokens + p.kv_tokens + p.replay_tokens, st.context) << label;
    if (p.kv_tokens > 0) {
      EXPECT_EQ(p.replay_tokens, st.context - st.available) << label;
      EXPECT_EQ(p.front_tokens % 16, 0) << label << ": the split is on a block boundary";
    } else {
      EXPECT_EQ(p.front_tokens, st.context) << label << ": all recomputed in one pass";
    }
    const MoveEstimate e = estimate_move(p, f.methods, route, queue, f.compute);
    EXPECT_EQ(e.total_ns(), best_split_ns(f, unsplit, route, queue)) << label;
    // Shipping everything and recomputing everything are both splits: hybrid never loses.
    for (Strategy s : {Strategy::kFullKv, Strategy::kPrefixRecompute, Strategy::kTokenReplay}) {
      const MovePlan other = plan_move(s, f.methods, st);
      EXPECT_LE(e.total_ns(), estimate_move(other, f.methods, route, queue, f.compute).total_ns())
          << label << " vs " << strategy_name(s);
    }
    // The overlap: the front runs behind the queue, once its ids are in, while the rest
    // arrives; the ids of every recomputed token travel first.
    if (p.front_tokens > 0) {
      const double bps = route.data_path.bandwidth.value;
      const std::int64_t latency = round_to_ns(route.data_path.latency.value);
      const std::int64_t ids = 4 * (p.front_tokens + p.replay_tokens);
      EXPECT_EQ(p.tokens, Bytes{ids}) << label;
      const std::int64_t ids_in = latency + round_to_ns(8.0 * static_cast<double>(ids) / bps);
      const std::int64_t front = round_to_ns(f.compute.prefill(f.model, p.front_tokens).value);
      const std::int64_t tail =
          p.replay_tokens > 0
              ? round_to_ns(f.compute.extend(f.model, p.replay_prefix(), p.replay_tokens).value)
              : 0;
      EXPECT_EQ(e.total_ns(), std::max(e.transfer_ns, std::max(queue, ids_in) + front) + tail)
          << label;
      EXPECT_GE(e.total_ns(), ids_in + front) << label;
    }
  }
}

TEST(Hybrid, FastLinksShipEverythingSlowLinksRecomputeEverything) {
  Fixture f;
  const MoveState st{4096, 4096, SourceKv::kFull, true, true};
  const MovePlan unsplit = plan_move(Strategy::kHybrid, f.methods, st);
  const MovePlan fast = balance_hybrid(unsplit, f.methods, network(1e13, 0), 0, f.compute);
  EXPECT_EQ(fast.front_tokens, 0);
  EXPECT_EQ(fast.kv, kv_bytes(f.model, 4096));
  const MovePlan slow = balance_hybrid(unsplit, f.methods, network(1e6, 0), 0, f.compute);
  EXPECT_EQ(slow.front_tokens, 4096);
  EXPECT_EQ(slow.kv, Bytes{});
  // A GPU busy for longer than the whole transfer gains nothing from recomputing.
  const MoveRoute mid = network(10e9, 0);
  const std::int64_t all = estimate_move(unsplit, f.methods, mid, 0, f.compute).transfer_ns;
  EXPECT_EQ(balance_hybrid(unsplit, f.methods, mid, all + 1, f.compute).front_tokens, 0);
  // In between, the split balances: one block either side crosses over.
  const MovePlan p = balance_hybrid(unsplit, f.methods, mid, 0, f.compute);
  ASSERT_GT(p.front_tokens, 0);
  ASSERT_LT(p.front_tokens, 4096);
  auto front_end = [&](std::int64_t s) { return round_to_ns(f.compute.prefill(f.model, s).value); };
  auto transfer = [&](std::int64_t s) {
    return round_to_ns(kv_bytes(f.model, 4096 - s).bits() / 10e9);
  };
  EXPECT_LT(front_end(p.front_tokens - 16), transfer(p.front_tokens - 16));
  EXPECT_GE(front_end(p.front_tokens + 16), transfer(p.front_tokens + 16));
  // Other strategies are returned as they are.
  const MovePlan full = plan_move(Strategy::kFullKv, f.methods, st);
  EXPECT_EQ(balance_hybrid(full, f.methods, mid, 0, f.compute).kv, full.kv);
}

// Recomputing a token needs its id at the receiver: every plan that recomputes tokens from a
// source ships their ids, and no move over the network ends before its latency and the ids'
// transfer. The audit's case: a hybrid over a 10 Mbps, 10 ms link priced at 11.2 ms, below token
// replay's 27.7 ms, because its ids travelled for free.
TEST(RecomputedTokens, EveryPlanShipsTheIdsOfWhatTheReceiverRecomputes) {
  Fixture f;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log_bw(std::log(1e6), std::log(4e11));
  std::uniform_int_distribution<std::int64_t> tokens(16, 9000), backlog(0, 50'000'000);
  int recomputing = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::int64_t t = tokens(rng), queue = trial % 2 ? backlog(rng) : 0;
    const double latency = trial % 3 == 0 ? 20e-3 : 100e-6;
    const MoveRoute route = network(std::exp(log_bw(rng)), latency);
    const MoveState st{t, trial % 4 == 0 ? t - t / 3 : t, SourceKv::kFull, true, true};
    for (Strategy s : kConcreteStrategies) {
      const MovePlan p =
          balance_hybrid(plan_move(s, f.methods, st), f.methods, route, queue, f.compute);
      ASSERT_TRUE(p.feasible()) << strategy_name(s);
      const std::int64_t recomputed = p.front_tokens + p.replay_tokens;
      EXPECT_EQ(p.tokens.count, 4 * recomputed) << strategy_name(s) << " at " << t;
      const MoveEstimate e = estimate_move(p, f.methods, route, queue, f.compute);
      const std::int64_t floor =
          round_to_ns(latency) + round_to_ns(p.tokens.bits() / route.data_path.bandwidth.value);
      if (recomputed > 0) {
        ++recomputing;
        EXPECT_GE(e.total_ns(), floor) << strategy_name(s) << " at " << t;
        EXPECT_GE(e.transfer_ns, floor) << strategy_name(s) << ": the ids are part of the move";
      }
    }
  }
  EXPECT_GT(recomputing, 400) << "the property must have been exercised";
  // The audit's repro (kvshift cost --model qwen2.5-1.5b --tokens 2048 --bandwidth 10Mbps
  // --latency 10ms --gpu h100): the hybrid recomputes everything and is token replay.
  const RooflineCosts h100(find_gpu("h100"));
  const MoveState whole{2048, 2048, SourceKv::kFull, true, true};
  const MoveRoute wan = network(10e6, 10e-3);
  const MovePlan hybrid =
      balance_hybrid(plan_move(Strategy::kHybrid, f.methods, whole), f.methods, wan, 0, h100);
  const std::int64_t hybrid_ns = estimate_move(hybrid, f.methods, wan, 0, h100).total_ns();
  const std::int64_t replay_ns =
      estimate_move(plan_move(Strategy::kTokenReplay, f.methods, whole), f.methods, wan, 0, h100)
          .total_ns();
  EXPECT_GE(hybrid_ns, 10'000'000 + round_to_ns(8.0 * 4 * hybrid.recomputed_tokens() / 10e6));
  EXPECT_EQ(hybrid.front_tokens, 2048);
  EXPECT_EQ(hybrid_ns, replay_ns);
}

TEST(ContextQuality, LinearBetweenMeasuredContextsAndTheNearestOutside) {
  const std::vector<ContextQuality> q = {{512, 0.2}, {1024, 0.1}, {4096, 0.4}};
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 1), 0.2);
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 512), 0.2);
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 768), 0.15);
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 1024), 0.1);
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 2560), 0.25);
  EXPECT_DOUBLE_EQ(delta_nll_at_context(q, 100000), 0.4);
}

TEST(StrategyNamed, EveryNameRoundTrips) {
  for (Strategy s : kConcreteStrategies) EXPECT_EQ(strategy_named(strategy_name(s)), s);
  EXPECT_EQ(strategy_named("adaptive"), Strategy::kAdaptive);
  EXPECT_EQ(strategy_named("cake"), std::nullopt);
}

}  // namespace
}  // namespace kvshift::cost_model
