// `kvshift replay SCENARIO`: a small scenario served for real. Each GPU node
// is a process (replay_node.hpp) forked from this one, with the model, the
// predictors and the mapper loaded once before the fork; this process is the
// client and the router: it sends each request when the scenario's trace says it
// arrives (the simulator's own workload stream: same seed, same requests), to
// the least loaded node with room in its batch, drains nodes by moving their
// decoding requests with the run's strategy (hybrid split where the cost model's
// balance_hybrid puts it), fails nodes by killing their
// process (SIGKILL) and recovers what they held from its tokens after the
// detection delay, and restarts a node at its repair. It keeps the same records
// as the simulator (sim::RequestRecord, sim::MoveRecord), timed on its steady
// clock, so both are read by the same code (replay_fidelity.hpp). After the
// run, each moved request's receiver measures what the move did to its text
// (continuation.hpp) against a prefill of the same context.
//
// Bounded and self-cleaning: loopback only (the nodes' moves on 127.0.0.1,
// ports the kernel picks; control over socketpairs), every node is killed and
// reaped before run_replay returns or throws, and a node whose coordinator dies
// gets SIGKILL from the kernel (PR_SET_PDEATHSIG).
// Leaves out: prefix recompute, replica protection, prefill/decode pools,
// prefix caching, preemption, link events (InputError names the field), and the
// CUDA backend.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "cost_model/move_plan.hpp"
#include "input/scenario_spec.hpp"
#include "sim/serving/results.hpp"
#include "testbed/move_setup.hpp"

namespace kvshift::testbed {

/// The most GPU nodes replay brings up as processes.
inline constexpr int kMaxReplayNodes = 4;

struct ReplayOptions {
  ModelInputs inputs;
  /// Tokens each moved request decodes afterwards, on its receiver and from a prefill of its
  /// context, to measure the move's real quality cost; 0: not measured.
  int continuation = 16;
  std::int64_t max_tokens = 2048;  ///< prompts drawn longer are clipped (said in the notes)
  /// The strategies replayed, one run each; empty: the scenario's (adaptive: not replayed).
  std::vector<cost_model::Strategy> strategies;
};

/// What one move did to its request's text (ContinuationQuality's figures).
struct MoveQuality {
  int steps = 0;  ///< 0: not measured
  double greedy_agreement = 0, sampled_agreement = 0, delta_nll = 0;
};

struct ReplayRun {
  cost_model::Strategy strategy = cost_model::Strategy::kFullKv;
  std::int64_t duration_ns = 0;
  std::vector<sim::RequestRecord> requests;
  /// delta_nll: what the simulator charges this move (its plan's).
  std::vector<sim::MoveRecord> moves;
  std::vector<MoveQuality> quality;  ///< one per move
  /// One per move: how long its source waited for the decode step in flight before packing
  /// (a cost the simulator does not charge); -1: none (a recovery has no live source).
  std::vector<std::int64_t> source_wait_ns;
  double wall_s = 0;
  std::vector<std::string> notes;
};

/// InputError naming the field for a scenario replay cannot serve.
void check_replayable(const input::ScenarioSpec& spec);

/// The concrete strategies replayed for `spec` (`asked`, or the scenario's when empty).
std::vector<cost_model::Strategy> replay_strategies(const input::ScenarioSpec& spec,
                                                    const std::vector<cost_model::Strategy>& asked);

/// Serves the scenario once per strategy; `costs` (the scenario's) plans hybrid's split.
std::vector<ReplayRun> run_replay(const input::ScenarioSpec& spec, const MoveSetup& setup,
                                  const cost_model::ComputeCosts& costs,
                                  const ReplayOptions& options,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace kvshift::testbed
