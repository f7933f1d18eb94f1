// Move plans, their estimator and the adaptive choice, on exact values.
#include "cost_model/move_plan.hpp"

#include <gtest/gtest.h>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "tests/cost_model/move_fixture.hpp"

namespace kvshift::cost_model {
namespace {

using Fixture = MoveFixture;

TEST(MovePlan, EachStrategyShipsItsBytesAndRebuildsItsTokens) {
  Fixture f;
  const MoveState st{1000, 800, SourceKv::kFull, true, false};
  const MovePlan full = plan_move(Strategy::kFullKv, f.methods, st);
  EXPECT_EQ(full.kv, kv_bytes(f.model, 800));
  EXPECT_EQ(full.replay_tokens, 200);  // the tail the source never held
  EXPECT_EQ(full.delta_nll, 0);
  const MovePlan replay = plan_move(Strategy::kTokenReplay, f.methods, st);
  EXPECT_EQ(replay.tokens, Bytes{4000});
  EXPECT_EQ(replay.replay_tokens, 1000);
  EXPECT_EQ(replay.kv, Bytes{});
  const MovePlan risk = plan_move(Strategy::kRiskKv, f.methods, st);
  EXPECT_EQ(risk.kv, storage(f.model, f.topology, 800, {}).kv_kept);
  EXPECT_EQ(risk.predictor, predictor_bytes(f.methods));
  EXPECT_GT(risk.predictor.count, 0);
  EXPECT_EQ(risk.reconstruct_tokens, 800);
  EXPECT_EQ(risk.replay_tokens, 200);
  EXPECT_DOUBLE_EQ(risk.delta_nll, 0.002);
  MoveState resident = st;
  resident.predictor_at_dst = true;
  EXPECT_EQ(plan_move(Strategy::kRiskKv, f.methods, resident).predictor, Bytes{});
  const MovePlan proxy = plan_move(Strategy::kProxyKv, f.methods, st);
  EXPECT_EQ(proxy.kv.count, std::llround(0.25 * static_cast<double>(kv_bytes(f.model, 800).count)));
  EXPECT_DOUBLE_EQ(proxy.delta_nll, 0.03);
}

TEST(MovePlan, RiskKvWithSinkRowsShipsThemAsTheirOwnBlocks) {
  Fixture f;
  const MoveState st{1000, 800, SourceKv::kFull, true, false};
  const MovePlan plain = plan_move(Strategy::kRiskKv, f.methods, st);
  const OmissionPlan with_sinks = f.topology.with_sink_rows(4);
  MoveMethods methods = f.methods;
  methods.omission = &with_sinks;
  const MovePlan sinks = plan_move(Strategy::kRiskKv, methods, st);
  const int omitted = f.topology.omitted_layers();
  EXPECT_EQ(sinks.kv.count - plain.kv.count, 4 * omitted * f.model.kv_bytes_per_layer_token());
  EXPECT_EQ(sinks.descriptors - plain.descriptors, kv_descriptors(methods.engine, 4, omitted));
  EXPECT_EQ(sinks.reconstruct_tokens, plain.reconstruct_tokens);
  EXPECT_EQ(sinks.predictor, plain.predictor);
}

TEST(MovePlan, AKvStrategyWithNoKvAtTheSourceIsAReplayAndSaysSo) {
  Fixture f;
  for (Strategy s : {Strategy::kFullKv, Strategy::kRiskKv, Strategy::kProxyKv}) {
    const MovePlan p = plan_move(s, f.methods, {500, 0, SourceKv::kFull, true, false});
    EXPECT_EQ(p.strategy, Strategy::kTokenReplay) << strategy_name(s);
    EXPECT_EQ(p.delta_nll, 0) << "no rebuild, no quality cost";
    EXPECT_NE(p.note.find("no KV"), std::string::npos) << p.note;
    EXPECT_EQ(p.tokens, Bytes{2000});
  }
  // Without a source node the router holds the ids: nothing to ship.
  EXPECT_EQ(plan_move(Strategy::kFullKv, f.methods, {500, 0, SourceKv::kNone, true, false}).tokens,
            Bytes{});
}

TEST(MovePlan, WhatCannotRunSaysWhy) {
  Fixture f;
  const MoveState kept{1000, 1000, SourceKv::kKeptLayers, true, true};
  EXPECT_FALSE(plan_move(Strategy::kFullKv, f.methods, kept).feasible());
  EXPECT_TRUE(plan_move(Strategy::kRiskKv, f.methods, kept).feasible());
  EXPECT_FALSE(
      plan_move(Strategy::kRiskKv, f.methods, {1000, 1000, SourceKv::kKeptTokens, true, true})
          .feasible());
  MoveState unscored{1000, 1000, SourceKv::kFull, false, true};
  EXPECT_NE(plan_move(Strategy::kProxyKv, f.methods, unscored).infeasible.find("scores"),
            std::string::npos);
  MoveMethods no_risk = f.methods;
  no_risk.omission = nullptr;
  EXPECT_FALSE(plan_move(Strategy::kRiskKv, no_risk, kept).feasible());
}

TEST(MoveEstimate, TransfersRunInParallelAndOnlyGpuWorkWaitsForTheQueue) {
  Fixture f;
  const RooflineCosts compute(find_gpu("h100"));
  MoveRoute route;
  route.data = MoveRoute::Leg::kNetwork;
  route.data_path = {BitsPerSecond{1e9}, Seconds{0.001}};
  route.predictor = MoveRoute::Leg::kNetwork;
  route.predictor_path = {BitsPerSecond{1e10}, Seconds{0.002}};
  const MoveState st{2048, 2048, SourceKv::kFull, true, false};
  const MovePlan full = plan_move(Strategy::kFullKv, f.methods, st);
  const MoveEstimate ef = estimate_move(full, f.methods, route, 5'000'000'000, compute);
  EXPECT_EQ(ef.transfer_ns, 1'000'000 + round_to_ns(full.kv.bits() / 1e9));
  EXPECT_EQ(ef.queue_ns, 0) << "a pure transfer does not wait for a busy GPU";
  const MovePlan risk = plan_move(Strategy::kRiskKv, f.methods, st);
  const MoveEstimate er = estimate_move(risk, f.methods, route, 0, compute);
  EXPECT_EQ(er.transfer_ns, std::max(1'000'000 + round_to_ns(risk.kv.bits() / 1e9),
                                     2'000'000 + round_to_ns(risk.predictor.bits() / 1e10)));
  EXPECT_EQ(er.compute_ns,
            round_to_ns(compute.reconstruct(f.model, f.topology, 2048, 1, DType::kF32).value));
  // A busy GPU delays the rebuild by what is left of its queue once the bytes are in.
  const MoveEstimate busy = estimate_move(risk, f.methods, route, er.transfer_ns + 7, compute);
  EXPECT_EQ(busy.queue_ns, 7);
  EXPECT_EQ(busy.total_ns(), er.total_ns() + 7);
  MoveRoute cut = route;
  cut.data = MoveRoute::Leg::kUnreachable;
  EXPECT_FALSE(estimate_move(full, f.methods, cut, 0, compute).reachable);
  // The predictor travelling with the data shares its path: the bytes add up.
  MoveRoute shared = route;
  shared.predictor = MoveRoute::Leg::kWithData;
  EXPECT_EQ(estimate_move(risk, f.methods, shared, 0, compute).transfer_ns,
            1'000'000 + round_to_ns((risk.kv + risk.predictor).bits() / 1e9));
}

TEST(PickFastest, FastestFeasibleWithinTheBudgetTiesToTheEarlier) {
  auto option = [](std::int64_t ns, double dnll, bool feasible = true, bool reachable = true) {
    MoveCandidate c;
    c.estimate.transfer_ns = ns;
    c.estimate.reachable = reachable;
    c.plan.delta_nll = dnll;
    if (!feasible) c.plan.infeasible = "no";
    return c;
  };
  std::vector<MoveCandidate> cs = {option(50, 0),        option(10, 0.5),
                                   option(20, 0, false), option(5, 0, true, false),
                                   option(30, 0.001),    option(30, 0)};
  EXPECT_EQ(pick_fastest(cs, std::nullopt), 1u);
  EXPECT_EQ(pick_fastest(cs, 0.01), 4u);  // the 10 ns option costs too much quality
  EXPECT_EQ(pick_fastest(cs, 0.0), 5u);
  EXPECT_EQ(pick_fastest({option(1, 0, false)}, std::nullopt), std::nullopt);
  // Never slower than any other qualifying candidate.
  const std::size_t best = *pick_fastest(cs, 0.01);
  for (const MoveCandidate& c : cs) {
    if (c.plan.feasible() && c.estimate.reachable && c.plan.delta_nll <= 0.01) {
      EXPECT_LE(cs[best].estimate.total_ns(), c.estimate.total_ns());
    }
  }
}

TEST(MakeRoute, EachLegIsLocalNetworkUnreachableOrNoneAndAPredictorFromTheSourceRidesWithIt) {
  using Leg = MoveRoute::Leg;
  // Nodes 0-2 reach one another; node 3 reaches nothing.
  std::vector<std::pair<int, int>> asked;
  const PathFinder path_to = [&](int from, int to) -> std::optional<Path> {
    asked.emplace_back(from, to);
    if (from == 3 || to == 3) return std::nullopt;
    return Path{BitsPerSecond{1e9 * (from + 1)}, Seconds{1e-3 * (to + 1)}};
  };
  const BitsPerSecond host{256e9};
  MovePlan plan;
  MoveRoute r = make_route(plan, 0, 1, 2, host, path_to);
  EXPECT_EQ(r.data, Leg::kNetwork);
  EXPECT_EQ(r.data_path.bandwidth.value, 1e9);
  EXPECT_EQ(r.data_path.latency.value, 3e-3);
  EXPECT_EQ(r.predictor, Leg::kNone) << "a plan without predictors has no predictor leg";
  EXPECT_EQ(r.host_link.value, host.value);
  EXPECT_EQ(asked.size(), 1u);

  plan.predictor = Bytes{1000};
  r = make_route(plan, 0, 1, 2, host, path_to);
  EXPECT_EQ(r.predictor, Leg::kNetwork);
  EXPECT_EQ(r.predictor_path.bandwidth.value, 2e9);
  EXPECT_EQ(make_route(plan, 0, 0, 2, host, path_to).predictor, Leg::kWithData);
  EXPECT_EQ(make_route(plan, 2, 2, 2, host, path_to).predictor, Leg::kLocal)
      << "on the destination's own node both legs use its host link";
  EXPECT_EQ(make_route(plan, 2, 2, 2, host, path_to).data, Leg::kLocal);
  EXPECT_EQ(make_route(plan, 3, 1, 2, host, path_to).data, Leg::kUnreachable);
  EXPECT_EQ(make_route(plan, -1, 3, 2, host, path_to).data, Leg::kNone);
  EXPECT_EQ(make_route(plan, -1, 3, 2, host, path_to).predictor, Leg::kUnreachable);
  EXPECT_EQ(make_route(plan, 0, -1, 2, host, path_to).predictor, Leg::kNone);
}

}  // namespace
}  // namespace kvshift::cost_model
