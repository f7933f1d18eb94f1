// Regression checks of simulated runs against the closed-form cost model
// (`kvshift check`). A scenario with a single request has uncontended moves:
// each must match the cost model's formula to the nanosecond (the same
// durations, rounded once each, as the simulator rounds them). Loaded
// scenarios are compared with golden metrics recorded beside them, within the
// relative tolerance the golden file states.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_spec.hpp"
#include "sim/serving/results.hpp"

namespace kvshift::reports {

/// The cost model's duration (ns) of one uncontended move as the simulator recorded it.
std::int64_t closed_form_move_ns(const input::ScenarioSpec& spec, const sim::MoveRecord& move,
                                 const cost_model::ComputeCosts& compute);

/// The metrics a golden file pins, per strategy ("recovery.p50_s", "bytes.kv", ...).
nlohmann::json golden_metrics(const nlohmann::json& summary);

struct CheckOutcome {
  bool ok = true;
  std::vector<std::string> lines;  ///< what was compared, and every mismatch
};

/// Exact checks of every move (single-request scenarios).
CheckOutcome check_moves_exact(const input::ScenarioSpec& spec,
                               const std::vector<sim::RunResult>& runs,
                               const cost_model::ComputeCosts& compute);

/// A golden file's tolerance_rel: a finite number >= 0, else InputError naming /tolerance_rel.
double golden_tolerance(const nlohmann::json& golden);

/// Compares `summary` with a golden {"tolerance_rel": x, "metrics": {...}}; a golden whose
/// tolerance or metrics are not numbers is InputError naming the field (a bad golden file).
CheckOutcome check_golden(const nlohmann::json& summary, const nlohmann::json& golden);

}  // namespace kvshift::reports
