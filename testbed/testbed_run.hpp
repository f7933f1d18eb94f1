// `kvshift testbed SCENARIO`: a small scenario's cluster brought up as real
// agents (one per GPU node, agent.hpp) joined by its shaped links
// (cluster_links.hpp); its moves replayed one at a time with each strategy's
// real payload (kv_payload.hpp) and the receiver's real work (receiver_work.hpp);
// every move set beside the cost model's plan and estimate for the same move
// (cost_model/move_plan.hpp: plan_move + estimate_move, the estimator the
// simulator and `kvshift cost` use). The source's KV comes from a real prefill
// of seeded random token ids, or of a corpus's text, on the model's weights (a
// model folder) or on seeded random weights of its shape (said in the summary).
// ProxyKV's kept tokens are chosen by a trained mapper on its proxy's prefill
// (--mapper), else by H2O scores of the target's prefill; either way off the
// move's critical path, so not timed. After each
// move the request decodes on the receiver and on the source, and what the move
// did to its text is measured (continuation.hpp). Leaves out: the simulator's
// queueing (each move runs alone on an idle cluster), predictor shipping
// (predictors are preloaded), the CUDA backend.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_spec.hpp"
#include "testbed/faults.hpp"
#include "testbed/move_setup.hpp"

namespace kvshift::testbed {

/// The most agents (GPU nodes) a scenario may bring up on one machine.
inline constexpr int kMaxAgents = 16;

struct TestbedOptions {
  std::int64_t moves = 0;  ///< synthetic moves; 0: the scenario's own (drains, node failures)
  FaultSpec faults;
  /// Weights, predictors, mapper and corpus (without a corpus the contexts are seeded random
  /// ids, and the measured ΔNLL speaks of random text: the summary says so); its seed also
  /// draws the synthetic moves' nodes.
  ModelInputs inputs;
  std::int64_t max_tokens = 2048;  ///< contexts drawn longer are clipped (a CPU prefill per move)
  /// Tokens the request decodes after each move, on the receiver and on the source, to measure
  /// what the move did to its text (continuation.hpp); 0: not measured.
  int continuation = 32;
};

/// One move as measured and as predicted. Times in seconds.
struct MoveRow {
  int move = 0;
  std::string strategy, src, dst, path, work, state, reason;
  std::int64_t tokens = 0;
  std::uint64_t bytes = 0;          ///< on the wire (payload, without frame headers)
  std::uint64_t planned_bytes = 0;  ///< the plan's kv + token bytes
  double transfer_s = 0, decode_s = 0, compute_s = 0, total_s = 0;
  double predicted_transfer_s = 0, predicted_compute_s = 0, predicted_total_s = 0;
  std::uint64_t frames = 0, bytes_resent = 0, faults = 0;
  int connections = 0;
  std::string note;  ///< why the measured time may not speak for the model (e.g. over the ceiling)
  /// What the move did to the request's text (continuation.hpp), beside the ΔNLL per token the
  /// simulator charges this move (its plan's); steps 0: not measured.
  double charged_delta_nll = 0;
  int continuation_steps = 0;
  double greedy_agreement = 0, sampled_agreement = 0, real_delta_nll = 0;
  double text_delta_nll = 0;  ///< on the corpus's text after the context (NaN without --corpus)
};

struct TestbedRun {
  std::vector<MoveRow> rows;
  nlohmann::json summary;
};

/// Runs the moves; InputError (naming the flag or JSON field) for what cannot run here.
TestbedRun run_testbed(const input::ScenarioSpec& spec, const cost_model::ComputeCosts& costs,
                       const TestbedOptions& options,
                       const std::function<void(const std::string&)>& progress = {});

/// testbed.csv: one row per move, with the relative errors.
std::string testbed_csv(const std::vector<MoveRow>& rows);

/// (measured − predicted) / predicted; 0 when both are 0, NaN when only the prediction is.
double relative_error(double measured, double predicted);

/// Median and 95th percentile (nearest rank) of |values|; NaNs are skipped.
struct ErrorStats {
  std::size_t n = 0;
  double median = 0, p95 = 0;
};
ErrorStats abs_error_stats(const std::vector<double>& errors);

}  // namespace kvshift::testbed
