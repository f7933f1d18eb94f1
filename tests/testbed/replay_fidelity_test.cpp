// The fidelity table reads both sides with the same code: the same records on both sides
// give no error anywhere and the same ranking; a replay twice as slow gives +100 % on every
// latency; the targets are judged on |error|.
#include "testbed/replay_fidelity.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace kvshift::testbed {
namespace {

sim::RequestRecord request(std::uint64_t id, std::int64_t arrival, std::int64_t first,
                           std::int64_t finish, std::int64_t output) {
  sim::RequestRecord r;
  r.id = id;
  r.arrival_ns = arrival;
  r.first_token_ns = first;
  r.finish_ns = finish;
  r.output_tokens = output;
  r.outcome = sim::RequestOutcome::kCompleted;
  return r;
}

sim::MoveRecord move(std::uint64_t id, std::int64_t start, std::int64_t end, std::int64_t bytes) {
  sim::MoveRecord m;
  m.request = id;
  m.start_ns = start;
  m.end_ns = end;
  m.kv_bytes = bytes;
  m.delta_nll = 0.01;
  return m;
}

/// A run whose every time is `scale` times the base one.
sim::RunResult simulated(const std::string& strategy, std::int64_t scale) {
  sim::RunResult run;
  run.strategy = strategy;
  for (std::uint64_t i = 0; i < 20; ++i) {
    const auto t = static_cast<std::int64_t>(i) * 1'000'000'000;
    run.requests.push_back(
        request(i, t, t + scale * (100 + 7 * i) * 1000, t + scale * (900 + 11 * i) * 1000, 33));
    run.moves.push_back(move(i, t, t + scale * (50 + 3 * i) * 1000, 1000 + 10 * i));
    run.moves.back().strategy = strategy;
  }
  return run;
}

ReplayRun replayed(cost_model::Strategy s, const sim::RunResult& from) {
  ReplayRun r;
  r.strategy = s;
  r.requests = from.requests;
  r.moves = from.moves;
  r.quality.assign(r.moves.size(), {8, 1.0, 1.0, 0.01});
  return r;
}

TEST(ReplayFidelity, TheSameRecordsOnBothSidesGiveNoError) {
  using cost_model::Strategy;
  const std::vector<sim::RunResult> sims{simulated("full_kv", 1), simulated("risk_kv", 2)};
  const std::vector<ReplayRun> reps{replayed(Strategy::kFullKv, sims[0]),
                                    replayed(Strategy::kRiskKv, sims[1])};
  const auto rows = fidelity_rows(sims, reps);
  ASSERT_EQ(rows.size(), 24u);  // 12 per strategy: its moves all ran as itself
  for (const FidelityRow& r : rows) {
    if (r.metric == "greedy_agreement") {
      EXPECT_TRUE(std::isnan(r.simulated));
      continue;
    }
    EXPECT_EQ(r.error, 0.0) << r.strategy << " " << r.metric;
    if (r.metric == "paired_move_p50") {
      EXPECT_NE(r.note.find("median |error| per move 0.0 %"), std::string::npos) << r.note;
    }
    EXPECT_EQ(r.simulated_n, r.replayed_n);
  }
  for (const char* metric : {"move_p50", "e2e_p99"}) {
    const auto ranking = strategy_ranking(rows, metric);
    EXPECT_TRUE(ranking["identical"].get<bool>());
    EXPECT_EQ(ranking["simulator"][0], "full_kv");  // half the latency of risk_kv's
  }
}

TEST(ReplayFidelity, AReplayTwiceAsSlowIsOffByAHundredPercentOnEveryLatency) {
  const std::vector<sim::RunResult> sims{simulated("full_kv", 1)};
  const std::vector<ReplayRun> reps{
      replayed(cost_model::Strategy::kFullKv, simulated("full_kv", 2))};
  for (const FidelityRow& r : fidelity_rows(sims, reps)) {
    if (r.unit != "s") continue;
    EXPECT_NEAR(r.error, 1.0, 1e-9) << r.metric;
    if (r.target > 0) {
      EXPECT_NE(fidelity_markdown({r}).find("missed"), std::string::npos);
    }
  }
}

TEST(ReplayFidelity, AMoveRowSaysWhereEachSidesTimeWent) {
  sim::RunResult sim = simulated("full_kv", 1);
  ReplayRun rep = replayed(cost_model::Strategy::kFullKv, sim);
  for (sim::MoveRecord& m : sim.moves) m.transfer_ns = 40'000'000;
  for (sim::MoveRecord& m : rep.moves) {
    m.transfer_ns = 47'500'000;
    m.queue_ns = 36'000'000;
    m.compute_ns = 3'000'000;
  }
  rep.source_wait_ns.assign(rep.moves.size(), 34'000'000);
  for (const FidelityRow& r : fidelity_rows({sim}, {rep})) {
    if (r.metric != "move_p50") continue;
    EXPECT_NE(r.note.find("transfer 47.5 / 40.0 ms, queue 36.0 / 0.0 ms (of it the source's "
                          "wait for its step in flight, which the simulator does not charge: "
                          "34.0 ms), compute 3.0 / 0.0 ms"),
              std::string::npos)
        << r.note;
    EXPECT_NE(fidelity_markdown({r}).find("34.0 ms"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvshift::testbed
