// The strategy table agrees with what plan_move does with each strategy: a table row that
// says lossy, prompt replay, needs scores or concrete must be so in its plans.
#include "cost_model/strategy.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "cost_model/move_plan.hpp"
#include "tests/cost_model/move_fixture.hpp"

namespace kvshift::cost_model {
namespace {

using Fixture = MoveFixture;

TEST(StrategyTable, NamesAreUniqueAndReadBack) {
  std::set<std::string> names;
  for (const StrategyTraits& t : kStrategyTraits) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    EXPECT_EQ(strategy_named(t.name), t.id);
    EXPECT_STRNE(t.summary, "");
  }
  EXPECT_EQ(strategy_named("fastest"), std::nullopt);
  EXPECT_EQ(kAllStrategies.size(), std::size(kStrategyTraits));
  EXPECT_EQ(kConcreteStrategies.size() + 1, kAllStrategies.size()) << "all but adaptive";
}

TEST(StrategyTable, EachRowSaysWhatItsPlansDo) {
  Fixture f;
  const MoveState full{1000, 1000, SourceKv::kFull, true, true};
  MoveState unscored = full;
  unscored.scored = false;
  for (const StrategyTraits& t : kStrategyTraits) {
    const MovePlan p = plan_move(t.id, f.methods, full);
    EXPECT_EQ(p.feasible(), t.concrete) << t.name << ": " << p.infeasible;
    if (!t.concrete) continue;
    EXPECT_EQ(p.delta_nll > 0, t.lossy) << t.name;
    EXPECT_EQ(p.replay_tokens == full.context && p.kv.count == 0, t.prompt_replay) << t.name;
    EXPECT_EQ(!plan_move(t.id, f.methods, unscored).feasible(), t.needs_scores) << t.name;
    // A crossover map compares closed forms without a quality cost of scores or a split.
    if (t.crossover) {
      EXPECT_FALSE(t.needs_scores) << t.name;
    }
  }
}

}  // namespace
}  // namespace kvshift::cost_model
