// Sweep plans: building, saving, loading points and simulating one point.
#include "sweep/sweep_plan.hpp"

#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/scenario_loader.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sweep/point_seed.hpp"
#include "sweep/sweep_axes.hpp"

namespace kvshift::sweep {

SweepPlan make_plan(const std::string& scenario, const std::vector<std::string>& sets) {
  SweepPlan plan;
  if (scenario.empty()) {
    plan.base = input::parse_json_text(input::embedded_quickstart_text(), "quickstart");
    plan.source = "quickstart";
  } else {
    plan.base = input::read_json_file(scenario);
    plan.source = scenario;
    const std::filesystem::path parent = std::filesystem::absolute(scenario).parent_path();
    plan.base_dir = parent.string();
  }
  plan.sets = sets;
  for (const std::string& s : sets) plan.axes.push_back(parse_axis(s));
  for (std::size_t i = 0; i < plan.axes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (plan.axes[i].pointer == plan.axes[j].pointer) {
        throw InputError("--set: " + plan.axes[i].pointer + " is set twice (\"" + sets[j] +
                         "\" and \"" + sets[i] + "\"); give all its values in one --set " +
                         plan.axes[i].pointer + "=v1,v2,...");
      }
    }
  }
  for (const Axis& a : plan.axes) {
    nlohmann::json probe = plan.base;
    apply_pointer(probe, a.pointer, a.values.front());  // throws when it matches nothing
  }
  point_count(plan.axes);
  return plan;
}

nlohmann::json plan_to_json(const SweepPlan& plan) {
  return {{"source", plan.source},
          {"base_dir", plan.base_dir},
          {"sets", plan.sets},
          {"points", point_count(plan.axes)},
          {"scenario", plan.base}};
}

SweepPlan plan_from_json(const nlohmann::json& j, const std::string& source) {
  SweepPlan plan;
  try {
    plan.base = j.at("scenario");
    plan.source = j.at("source").get<std::string>();
    plan.base_dir = j.at("base_dir").get<std::string>();
    plan.sets = j.at("sets").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + ": not a sweep plan written by kvshift sweep (" + e.what() + ")");
  }
  for (const std::string& s : plan.sets) plan.axes.push_back(parse_axis(s));
  return plan;
}

std::vector<std::pair<std::string, std::string>> point_settings(const SweepPlan& plan,
                                                                std::uint64_t k) {
  std::vector<std::pair<std::string, std::string>> settings;
  const std::vector<std::size_t> idx = point_indices(plan.axes, k);
  for (std::size_t i = 0; i < plan.axes.size(); ++i) {
    settings.emplace_back(plan.axes[i].pointer, plan.axes[i].labels[idx[i]]);
  }
  return settings;
}

std::string describe_point(const SweepPlan& plan, std::uint64_t k) {
  std::string text;
  for (const auto& [pointer, label] : point_settings(plan, k)) {
    text += (text.empty() ? "" : " ") + pointer + "=" + label;
  }
  return text.empty() ? "(base scenario)" : text;
}

input::ScenarioSpec load_point(const SweepPlan& plan, std::uint64_t k) {
  const nlohmann::json doc = point_document(plan.base, plan.axes, k);
  input::ScenarioLoad load = input::try_load_scenario_text(doc.dump(), plan.source, plan.base_dir);
  if (!load.spec) {
    std::string message = "point " + std::to_string(k) + " (" + describe_point(plan, k) + "):";
    for (const std::string& p : load.problems) message += "\n  " + plan.source + ": " + p;
    throw InputError(message);
  }
  // Common random numbers: every point simulates the same workload and faults (the
  // scenario's seed), so a bandwidth sweep compares one traffic; --replicates adds a /seed axis.
  return std::move(*load.spec);
}

void add_replicates(SweepPlan& plan, std::uint64_t replicates) {
  if (replicates < 2)
    throw InputError("--replicates: must be at least 2 (got " + std::to_string(replicates) + ")");
  if (replicates > 10000)
    throw InputError("--replicates: must be at most 10000 (got " + std::to_string(replicates) +
                     ")");
  for (const std::string& set : plan.sets) {
    if (set.rfind("/seed=", 0) == 0) throw InputError("--replicates: the sweep already sets /seed");
  }
  const std::uint64_t base = plan.base.value("seed", std::uint64_t{1});
  plan.base["seed"] = base;                            // the axis needs the key to set
  std::string axis = "/seed=" + std::to_string(base);  // replicate 0 is the scenario itself
  for (std::uint64_t r = 1; r < replicates; ++r) {
    // 63 bits: a scenario seed is a non-negative JSON integer.
    axis += "," + std::to_string(point_seed(base, {{"replicate", std::to_string(r)}}) >> 1);
  }
  plan.sets.push_back(axis);
  plan.axes.push_back(parse_axis(axis));
  point_count(plan.axes);  // throws when the product grows too large
}

std::unique_ptr<cost_model::ComputeCosts> roofline_costs(const input::ScenarioSpec& spec) {
  if (spec.cost_source.kind != input::CostSourceKind::kAnalytic) {
    throw InputError("/cost_source: only \"analytic\" costs are available here");
  }
  return std::make_unique<cost_model::RooflineCosts>(spec.gpu);
}

nlohmann::json simulate_point(const input::ScenarioSpec& spec, const CostFactory& costs) {
  const auto compute = costs(spec);
  sim::RunOptions options;
  options.record_trace = false;
  options.keep_records = false;  // a point needs only its summary
  const std::vector<sim::RunResult> runs = sim::run_scenario(spec, *compute, options);
  return reports::run_summary(spec, runs, compute->sources());
}

}  // namespace kvshift::sweep
