// The testbed's moves take their contexts from the simulator's own workload stream: move k is
// at the prompt of the scenario's k-th simulated request (same seed, same numbers).
#include "testbed/testbed_moves.hpp"

#include <gtest/gtest.h>

#include "input/scenario_loader.hpp"
#include "sim/workload.hpp"
#include "testbed/cluster_links.hpp"

namespace kvshift::testbed {
namespace {

TEST(TestbedMoves, ContextsAreTheScenariosSimulatedPromptsInOrder) {
  for (const char* name : {"quickstart.json", "trace-replay.json"}) {
    input::ScenarioSpec spec =
        input::load_scenario_file(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/" + name);
    std::erase_if(spec.policies.strategies, [](cost_model::Strategy s) {
      return cost_model::traits(s).concrete && !cost_model::traits(s).on_testbed;
    });
    const ClusterLinks links(spec.cluster);
    const std::vector<PlannedMove> moves = choose_moves(spec, links, 40, 1 << 30, 7);
    ASSERT_EQ(moves.size(), 40u) << name;
    sim::Workload stream = sim::scenario_workload(spec);
    std::vector<std::int64_t> prompts;
    for (auto a = stream.next(); a; a = stream.next()) prompts.push_back(a->prompt_tokens);
    ASSERT_FALSE(prompts.empty()) << name;
    for (std::size_t k = 0; k < moves.size(); ++k) {
      // From the first request again when the scenario simulates fewer.
      EXPECT_EQ(moves[k].tokens, prompts[k % prompts.size()]) << name << " move " << k;
      EXPECT_FALSE(moves[k].clipped);
    }
    // --max-tokens clips and says so; the seed moves the nodes, not the contexts.
    const std::vector<PlannedMove> clipped = choose_moves(spec, links, 40, 64, 8);
    for (std::size_t k = 0; k < clipped.size(); ++k) {
      EXPECT_EQ(clipped[k].tokens, std::min<std::int64_t>(64, moves[k].tokens));
      EXPECT_EQ(clipped[k].clipped, moves[k].tokens > 64);
    }
  }
}

}  // namespace
}  // namespace kvshift::testbed
