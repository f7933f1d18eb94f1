// run_scenario: one simulated run per strategy of a scenario, each on a fresh
// simulator, network and cluster, with the same seed — so the strategies see
// the same requests, failures and links, and differ only in how they move KV.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "sim/serving/results.hpp"
#include "sim/spec.hpp"

namespace kvshift::sim {

struct RunOptions {
  bool record_trace = true;
  /// Called about every 1 % of simulated time: (strategy, simulated seconds done, total).
  std::function<void(const std::string&, double, double)> progress;
  /// Keep every request and move record in RunResult (the tally is always there).
  bool keep_records = true;
  /// Receives the records as they become final (e.g. to write them as they come).
  RecordSink* sink = nullptr;
};

/// Runs every strategy of `spec.policies.strategies`, with durations from `compute`.
std::vector<RunResult> run_scenario(const SimulationSpec& spec,
                                    const cost_model::ComputeCosts& compute,
                                    const RunOptions& options = {});

}  // namespace kvshift::sim
