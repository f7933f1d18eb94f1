// `kvshift check [DIR] [--update]`: runs the regression scenarios and compares
// them with the closed-form cost model (single-request scenarios, to the
// nanosecond) or with the golden metrics stored beside them (<name>.golden).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "input/json_reader.hpp"
#include "input/scenario_loader.hpp"
#include "reports/atomic_file.hpp"
#include "reports/regression_check.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

struct CheckOptions {
  std::string dir = "scenarios/regression";
  bool update = false;
  double tolerance = 0.01;
};

/// `golden_path`'s JSON, checked against `summary`; a bad golden file is InputError naming it.
reports::CheckOutcome check_against(const nlohmann::json& summary, const fs::path& golden_path) {
  try {
    return reports::check_golden(summary, input::read_json_file(golden_path.string()));
  } catch (const InputError& e) {
    throw InputError("bad golden file " + golden_path.string() + ": " + e.what() +
                     " (rewrite it with kvshift check --update)");
  }
}

int check_all(const CheckOptions& o) {
  if (!(std::isfinite(o.tolerance) && o.tolerance >= 0)) {
    throw InputError("--tolerance: must be a finite number >= 0, a share such as 0.01 (got " +
                     format_g(o.tolerance) + ")");
  }
  if (!fs::is_directory(o.dir)) throw InputError("DIR: " + o.dir + " is not a folder");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(o.dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError("DIR: no *.json scenarios in " + o.dir);
  int failed = 0;
  for (const fs::path& file : files) {
    const input::ScenarioSpec spec = input::load_scenario_file(file.string());
    const auto compute = make_compute_costs(spec);
    const auto runs = sim::run_scenario(spec, *compute, {false, {}});
    const auto summary = reports::run_summary(spec, runs, compute->sources());
    const bool single = !runs.empty() && runs[0].requests.size() == 1;
    fs::path golden_path = file;
    golden_path.replace_extension(".golden");
    std::vector<reports::CheckOutcome> outcomes;
    if (single) outcomes.push_back(reports::check_moves_exact(spec, runs, *compute));
    if (o.update && !single) {
      double tol = o.tolerance;
      if (fs::exists(golden_path)) {
        const nlohmann::json old = input::read_json_file(golden_path.string());
        if (old.is_object() && old.contains("tolerance_rel")) {
          try {
            tol = reports::golden_tolerance(old);
          } catch (const InputError&) {  // a bad stored tolerance is replaced by --tolerance
          }
        }
      }
      const nlohmann::json golden = {{"scenario", spec.name},
                                     {"tolerance_rel", tol},
                                     {"metrics", reports::golden_metrics(summary)}};
      reports::write_file_atomic(golden_path, golden.dump(2) + "\n");
      outcomes.push_back({true, {"golden written to " + golden_path.string()}});
    } else if (fs::exists(golden_path)) {
      outcomes.push_back(check_against(summary, golden_path));
    } else if (!single) {
      outcomes.push_back({false,
                          {"no golden file " + golden_path.string() +
                           " (create it with kvshift check --update)"}});
    }
    bool ok = true;
    for (const auto& c : outcomes) ok &= c.ok;
    failed += ok ? 0 : 1;
    std::cout << (ok ? "ok    " : "FAIL  ") << spec.name << "\n";
    for (const auto& c : outcomes) {
      for (const std::string& line : c.lines) std::cout << "        " << line << "\n";
    }
  }
  std::cout << files.size() - failed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<CheckOptions>();
  sub.add_option("dir", o->dir, "Folder of regression scenarios")->capture_default_str();
  sub.add_flag("--update", o->update, "Rewrite the golden files from this run");
  sub.add_option("--tolerance", o->tolerance, "Relative tolerance written into new golden files")
      ->capture_default_str();
  return [o] { return check_all(*o); };
}

const RegisterCommand kRegister{
    {"check", "Compare regression scenarios with the cost model and their golden files", 50,
     setup}};

}  // namespace
}  // namespace kvshift::app
