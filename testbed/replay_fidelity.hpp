// The simulator's prediction set beside a replay of the same scenario: per
// strategy and metric (TTFT, TPOT, end-to-end latency at p50 and p99; move
// latency and bytes per move by the strategy that executed the move: the run's
// own ("move_p50") and its fallbacks' ("move_p50[token_replay]"), and over the
// moves both sides made of the same request; ΔNLL), both figures, the error, its
// cause where the records give it (a move's parts), and whether it meets the
// target (TTFT and move latency: 10 % at p50, 20 % at p99); and whether the two
// rank the strategies the same. Both sides are read from the same records
// (sim::RequestRecord, sim::MoveRecord) by the same code.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/serving/results.hpp"
#include "testbed/replay_run.hpp"

namespace kvshift::testbed {

struct FidelityRow {
  std::string strategy, metric, unit;
  double simulated = 0, replayed = 0;  ///< NaN: no sample on that side
  std::size_t simulated_n = 0, replayed_n = 0;
  double error = 0;   ///< (replayed − simulated) / simulated; NaN when undefined
  double target = 0;  ///< |error| allowed; 0: no target for this metric
  /// Why it differs (a move row: the medians of its parts on each side) and what makes the
  /// figure weak (few samples, a different meaning).
  std::string note;
};

/// The rows, strategy by strategy in the replay's order; `simulated[i]` is the simulator's
/// run of `replayed[i].strategy`.
std::vector<FidelityRow> fidelity_rows(const std::vector<sim::RunResult>& simulated,
                                       const std::vector<ReplayRun>& replayed);

/// Strategies ordered by `metric` (ascending) on each side, and whether the orders agree.
nlohmann::json strategy_ranking(const std::vector<FidelityRow>& rows, const std::string& metric);

std::string fidelity_csv(const std::vector<FidelityRow>& rows);
/// A Markdown table of the rows (for the console and fidelity.md).
std::string fidelity_markdown(const std::vector<FidelityRow>& rows);

}  // namespace kvshift::testbed
