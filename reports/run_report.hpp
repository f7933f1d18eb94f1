// Writers for a scenario run: summary.json (per strategy), requests.csv,
// recoveries.csv (one row per move), links.csv (utilisation over time),
// trace.json (Chrome trace-event format, opens in Perfetto) and the console
// comparison table. Only simulated values are written, formatted with fixed
// precision, so the same scenario and seed give byte-identical files.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_spec.hpp"
#include "sim/serving/results.hpp"

namespace kvshift::reports {

/// The summary object: scenario facts, where each op's durations came from (`costs`, from
/// ComputeCosts::sources() after the run), then one entry per strategy (with `busiest_link`,
/// each with its busiest link's utilisation over time: what the run's report.html draws).
nlohmann::json run_summary(const input::ScenarioSpec& spec, const std::vector<sim::RunResult>& runs,
                           const std::vector<cost_model::OpSource>& costs,
                           bool busiest_link = false);

/// Writes every file of spec.outputs.files into `dir` (atomically, file by file), from the
/// runs' kept records, except those whose keys are in `streamed` ("requests", "recoveries":
/// a RecordCsvWriter wrote them during the run). Returns the paths of all of them.
std::vector<std::filesystem::path> write_run_outputs(const std::filesystem::path& dir,
                                                     const input::ScenarioSpec& spec,
                                                     const std::vector<sim::RunResult>& runs,
                                                     const std::vector<cost_model::OpSource>& costs,
                                                     const std::vector<std::string>& streamed = {});

/// A short comparison table for the console, with where each op's durations came from.
std::string run_table(const nlohmann::json& summary);

}  // namespace kvshift::reports
