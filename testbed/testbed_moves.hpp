// Which moves a testbed run replays: the scenario's own (one per drain of a GPU
// node and strategy, to the nearest other GPU node) or N
// synthetic ones (source and destination drawn among the GPU nodes, strategies
// in turn); contexts drawn from the workload's prompt lengths. Seeded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/move_plan.hpp"
#include "input/scenario_spec.hpp"
#include "testbed/cluster_links.hpp"

namespace kvshift::testbed {

struct PlannedMove {
  cost_model::Strategy strategy = cost_model::Strategy::kFullKv;
  std::string src, dst;
  std::int64_t tokens = 0;
  bool clipped = false;  ///< the drawn context was longer than max_tokens
};

/// The concrete strategies the scenario runs (adaptive: every concrete one it can run).
std::vector<cost_model::Strategy> testbed_strategies(const input::ScenarioSpec& spec);

/// The moves; InputError when there are none to replay and none were asked for. Move k's
/// context is the prompt of the scenario's k-th simulated request (clipped to `max_tokens`);
/// `seed` picks the synthetic moves' nodes.
std::vector<PlannedMove> choose_moves(const input::ScenarioSpec& spec, const ClusterLinks& links,
                                      std::int64_t synthetic, std::int64_t max_tokens,
                                      std::uint64_t seed);

}  // namespace kvshift::testbed
