// The move policies against a table of prices: what each picks, in what order it tries the
// destinations, when it falls back and what it says, and what pre-work it asks for.
#include "sim/serving/move_policy.hpp"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace kvshift::sim {
namespace {

using cost_model::MoveCandidate;

/// One priced option: its time, whether it runs and reaches, and its quality cost.
struct Price {
  std::int64_t ns = 0;
  bool reachable = true;
  std::string infeasible;
  double delta_nll = 0;
};

/// Prices from a table; anything not in it is feasible and reachable at 1 s. Records every ask.
struct FakePricer {
  std::map<std::pair<Strategy, int>, Price> table;
  mutable std::vector<std::tuple<Strategy, int, int, cost_model::SourceKv>> asked;

  MovePricer pricer() const {
    return [this](Strategy s, const cost_model::MoveState& state, int src, int gpu) {
      asked.emplace_back(s, src, gpu, state.source);
      const auto it = table.find({s, gpu});
      const Price p = it == table.end() ? Price{1'000'000'000} : it->second;
      MoveCandidate c;
      c.plan.strategy = s;
      c.plan.infeasible = p.infeasible;
      c.plan.delta_nll = p.delta_nll;
      c.estimate.reachable = p.reachable;
      c.estimate.transfer_ns = p.ns;
      c.destination = gpu;
      return c;
    };
  }
};

MoveAsk ask_for(std::vector<int> destinations, int src = 3) {
  MoveAsk a;
  a.state = {1024, 1024, cost_model::SourceKv::kFull, true, false};
  a.src = src;
  a.src_name = "n3";
  a.destinations = std::move(destinations);
  return a;
}

TEST(MovePolicy, AFixedStrategyTakesTheFirstDestinationItReachesAndSaysNothing) {
  FakePricer f;
  f.table[{Strategy::kRiskKv, 10}] = {5, false};  // unreachable, though fastest
  f.table[{Strategy::kRiskKv, 11}] = {900};
  f.table[{Strategy::kRiskKv, 12}] = {1};  // faster, but later in the router's order
  const auto c = make_move_policy(Strategy::kRiskKv)->choose(ask_for({10, 11, 12}), f.pricer());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->option.plan.strategy, Strategy::kRiskKv);
  EXPECT_EQ(c->option.destination, 11);
  EXPECT_EQ(c->src, 3);
  EXPECT_EQ(c->fallback, "");
  EXPECT_EQ(f.asked.size(), 2u) << "it stops at the first destination that works";
}

TEST(MovePolicy, AFixedStrategyThatCannotRunFallsBackToFullKvThenReplayWithTheReason) {
  FakePricer f;
  f.table[{Strategy::kProxyKv, 10}] = {1, true, "no scores yet"};
  const auto c = make_move_policy(Strategy::kProxyKv)->choose(ask_for({10, 11}), f.pricer());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->option.plan.strategy, Strategy::kFullKv);
  EXPECT_EQ(c->option.destination, 10);
  EXPECT_EQ(c->fallback, "fallback to full_kv: proxy_kv cannot run here (no scores yet)");

  FakePricer g;  // full KV reaches nothing, token replay reaches the second GPU
  g.table[{Strategy::kRiskKv, 10}] = {1, false};
  g.table[{Strategy::kRiskKv, 11}] = {1, false};
  g.table[{Strategy::kFullKv, 10}] = {1, false};
  g.table[{Strategy::kFullKv, 11}] = {1, false};
  g.table[{Strategy::kTokenReplay, 10}] = {1, false};
  const auto d = make_move_policy(Strategy::kRiskKv)->choose(ask_for({10, 11}), g.pricer());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->option.plan.strategy, Strategy::kTokenReplay);
  EXPECT_EQ(d->option.destination, 11);
  EXPECT_EQ(d->fallback,
            "fallback to token_replay: risk_kv cannot run here (the source n3 cannot reach a "
            "destination with room)");
}

TEST(MovePolicy, AFixedStrategyOverTheQualityBudgetFallsBack) {
  FakePricer f;
  f.table[{Strategy::kProxyKv, 10}] = {1, true, "", 0.5};
  MoveAsk a = ask_for({10});
  a.quality_budget = 0.25;
  const auto c = make_move_policy(Strategy::kProxyKv)->choose(a, f.pricer());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->option.plan.strategy, Strategy::kFullKv);
  EXPECT_NE(c->fallback.find("is over the quality budget"), std::string::npos) << c->fallback;
  a.quality_budget = 0.5;  // at the budget is within it
  EXPECT_EQ(make_move_policy(Strategy::kProxyKv)->choose(a, f.pricer())->option.plan.strategy,
            Strategy::kProxyKv);
}

TEST(MovePolicy, AdaptiveWeighsEveryStrategyOnEveryDestination) {
  FakePricer f;
  f.table[{Strategy::kHybrid, 11}] = {7};
  f.table[{Strategy::kTokenReplay, 10}] = {7};  // a tie goes to the earlier candidate
  f.table[{Strategy::kFullKv, 11}] = {2, false};
  const auto c = make_move_policy(Strategy::kAdaptive)->choose(ask_for({10, 11}), f.pricer());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->option.plan.strategy, Strategy::kTokenReplay);
  EXPECT_EQ(c->option.destination, 10);
  EXPECT_EQ(c->fallback, "");
  EXPECT_EQ(f.asked.size(), 2 * std::size(cost_model::kConcreteStrategies));
}

TEST(MovePolicy, NoPolicyAnswersWhenNothingReachesAndTheRouterReplays) {
  FakePricer f;
  for (Strategy s : cost_model::kConcreteStrategies) f.table[{s, 10}] = {1, false};
  const MoveAsk a = ask_for({10});
  EXPECT_FALSE(make_move_policy(Strategy::kAdaptive)->choose(a, f.pricer()));
  EXPECT_FALSE(make_move_policy(Strategy::kFullKv)->choose(a, f.pricer()));
  f.asked.clear();
  const MoveChoice c = replay_from_router(a, f.pricer());
  EXPECT_EQ(c.option.plan.strategy, Strategy::kTokenReplay);
  EXPECT_EQ(c.src, -1);
  ASSERT_EQ(f.asked.size(), 1u);
  EXPECT_EQ(std::get<1>(f.asked[0]), -1) << "priced from no source";
  EXPECT_EQ(std::get<3>(f.asked[0]), cost_model::SourceKv::kNone);
  EXPECT_EQ(c.fallback,
            "replay from the router's token ids: no destination is reachable from the source");
  EXPECT_NE(replay_from_router(ask_for({10}, -1), f.pricer()).fallback.find("from the replica"),
            std::string::npos);
}

TEST(MovePolicy, AChosenPlanCarriesItsOwnNoteAsTheFallback) {
  const MovePricer price = [](Strategy s, const cost_model::MoveState&, int, int gpu) {
    MoveCandidate c;
    c.plan.strategy = s == Strategy::kRiskKv ? Strategy::kFullKv : s;
    c.plan.note = s == Strategy::kRiskKv ? "every layer kept" : "";
    c.destination = gpu;
    return c;
  };
  const auto c = make_move_policy(Strategy::kRiskKv)->choose(ask_for({4}), price);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->fallback, "every layer kept");
}

TEST(MovePolicy, ThePreWorkEachStrategyAsksFor) {
  for (Strategy s : cost_model::kConcreteStrategies) {
    const auto p = make_move_policy(s);
    EXPECT_EQ(p->needs_scores(), s == Strategy::kProxyKv) << strategy_name(s);
    EXPECT_EQ(p->handoff_waits_for_scores(), s == Strategy::kProxyKv) << strategy_name(s);
    EXPECT_EQ(p->prefills_where_it_decodes(), s == Strategy::kTokenReplay) << strategy_name(s);
  }
  // Adaptive scores every request (ProxyKV is one of its options) but never waits for them, and
  // keeps prefill and decode apart (a handoff may pick any strategy).
  const auto a = make_move_policy(Strategy::kAdaptive);
  EXPECT_TRUE(a->needs_scores());
  EXPECT_FALSE(a->handoff_waits_for_scores());
  EXPECT_FALSE(a->prefills_where_it_decodes());
}

}  // namespace
}  // namespace kvshift::sim
