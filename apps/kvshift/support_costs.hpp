// Picks the ComputeCosts a scenario asks for: the analytic roofline of its
// GPU, a cost table measured by `kvshift profile`, or live kernel runs.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_spec.hpp"
#include "sweep/sweep_plan.hpp"

namespace kvshift::app {

/// The scenario's cost source; throws InputError when it cannot be provided.
std::unique_ptr<cost_model::ComputeCosts> make_compute_costs(const input::ScenarioSpec& spec);

/// make_compute_costs for the points of a sweep or a search: points whose live sections, models,
/// topologies and ProxyKV settings agree share one live source, so each shape is measured once
/// per process (its sources() then count the shapes measured so far by every point).
sweep::CostFactory shared_cost_factory();

/// For a live source: the cost table of every shape it measured (live-costs.json), else nothing.
std::optional<std::string> live_cost_table(const cost_model::ComputeCosts& costs);

}  // namespace kvshift::app
