// A sweep plan: the base scenario document, where its relative paths resolve,
// and the axes. Points are loaded through the ordinary scenario loader, so a
// swept value that fails the schema is reported like any scenario mistake,
// prefixed with the point it belongs to. The plan is saved as DIR/sweep.json
// so `--resume DIR` continues exactly the sweep that was started.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_spec.hpp"
#include "sweep/sweep_axes.hpp"

namespace kvshift::sweep {

struct SweepPlan {
  nlohmann::json base;            ///< the scenario document
  std::string source;             ///< file name for messages
  std::string base_dir = ".";     ///< relative paths in the scenario resolve here
  std::vector<std::string> sets;  ///< the --set texts, as given
  std::vector<Axis> axes;         ///< parsed from `sets`
};

/// Builds a plan from a scenario file (or the embedded quickstart when `scenario` is empty).
SweepPlan make_plan(const std::string& scenario, const std::vector<std::string>& sets);

/// The plan as saved in DIR/sweep.json, and back.
nlohmann::json plan_to_json(const SweepPlan& plan);
SweepPlan plan_from_json(const nlohmann::json& j, const std::string& source);

/// The (pointer, label) settings of point `k`.
std::vector<std::pair<std::string, std::string>> point_settings(const SweepPlan& plan,
                                                                std::uint64_t k);
/// "/a/b=1Gbps /c=4": point `k` in messages.
std::string describe_point(const SweepPlan& plan, std::uint64_t k);

/// Loads point `k` (throws InputError prefixed with the point). Every point keeps the
/// scenario's seed (common random numbers).
input::ScenarioSpec load_point(const SweepPlan& plan, std::uint64_t k);

/// Adds a /seed axis of `replicates` seeds (the scenario's, then derived ones) to `plan`.
void add_replicates(SweepPlan& plan, std::uint64_t replicates);

/// Where a point's costs come from (the kvshift executable passes its own factory).
using CostFactory =
    std::function<std::unique_ptr<cost_model::ComputeCosts>(const input::ScenarioSpec&)>;

/// The analytic roofline of the scenario's GPU; InputError for other cost sources.
std::unique_ptr<cost_model::ComputeCosts> roofline_costs(const input::ScenarioSpec& spec);

/// Simulates one loaded point (no trace) and returns its summary object.
nlohmann::json simulate_point(const input::ScenarioSpec& spec, const CostFactory& costs);

}  // namespace kvshift::sweep
