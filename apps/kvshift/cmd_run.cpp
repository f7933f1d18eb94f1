// `kvshift run [SCENARIO]`: the main job. Loads a scenario (the embedded
// quickstart without one), simulates it once per strategy, writes the result
// files and prints a comparison table. Wall-clock figures go to the console
// only, never into the files, so the same scenario and seed give identical files.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "apps/kvshift/support_interrupt.hpp"
#include "apps/kvshift/support_out_folder.hpp"
#include "cost_model/input_error.hpp"
#include "input/scenario_loader.hpp"
#include "reports/atomic_file.hpp"
#include "reports/html_report.hpp"
#include "reports/record_csv.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::app {
namespace {

struct RunCliOptions {
  std::string scenario;
  std::string out;
  bool out_given = false;  ///< --out was typed (an empty one is refused, not the default)
  std::string seed;        ///< strict: a whole number in [0, 2^64)
  bool seed_given = false;
  bool no_trace = false;
  bool quiet = false;
  bool force = false;
};

namespace fs = std::filesystem;

/// kvshift-out/<name>-<time>, with -2, -3, ... when a run in the same second took it.
std::string default_out_dir(const std::string& name) {
  const std::string base = default_dir_base(name);
  std::string out = base;
  std::error_code ec;
  for (int n = 2; fs::exists(fs::symlink_status(out, ec)) && n < 1000; ++n) {
    out = base + "-" + std::to_string(n);
  }
  return out;
}

/// Moves the staged folder to the default folder `out`, or to `out`-2, -3, ... when a run
/// started in the same second got there first (rename never replaces a folder with files).
std::string publish_default(const fs::path& staged, const std::string& out) {
  std::error_code ec;
  for (int n = 1; n < 1000; ++n) {
    const std::string name = n == 1 ? out : out + "-" + std::to_string(n);
    if (fs::exists(fs::symlink_status(name, ec))) continue;
    fs::create_directories(fs::path(name).parent_path(), ec);
    fs::rename(staged, name, ec);
    if (!ec) return name;
  }
  throw std::runtime_error(out + ": cannot move the new folder into place: " + ec.message());
}

bool wants(const input::ScenarioSpec& spec, const char* file) {
  return std::find(spec.outputs.files.begin(), spec.outputs.files.end(), file) !=
         spec.outputs.files.end();
}

/// Progress on stderr once a run has taken 2 s: a live line on a terminal, else one line per
/// tenth of each strategy's simulated time.
std::function<void(const std::string&, double, double)> progress_reporter(
    bool quiet, std::chrono::steady_clock::time_point start) {
  const bool tty = ::isatty(STDERR_FILENO);
  return [quiet, start, tty, last_tenth = -1](const std::string& strategy, double done,
                                              double total) mutable {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (quiet || wall < 2.0) return;
    const int tenth = static_cast<int>(10 * done / total);
    if (tty) {
      std::fprintf(stderr, "\r  %-13s %5.1f%%  simulated %.1f / %.1f s  (%.1f s wall)",
                   strategy.c_str(), 100 * done / total, done, total, wall);
      if (done >= total) std::fputc('\n', stderr);
    } else if (tenth != last_tenth) {
      std::fprintf(stderr, "  %s: %d%% (simulated %.1f s, %.1f s wall)\n", strategy.c_str(),
                   10 * tenth, done, wall);
    }
    last_tenth = done >= total ? -1 : tenth;
  };
}

/// Simulates every strategy. requests.csv and recoveries.csv are written into `tmp` as the
/// records become final, so memory follows what is in flight; trace.json draws the moves, so
/// it keeps them. A failure removes `tmp`.
std::vector<sim::RunResult> simulate(const input::ScenarioSpec& spec,
                                     const cost_model::ComputeCosts& compute,
                                     sim::RunOptions options, const fs::path& tmp) {
  std::optional<reports::RecordCsvWriter> records;
  try {
    reports::DeploymentNames deployments;
    for (const sim::DeploymentSpec& d : spec.deployments) deployments.push_back(d.name);
    fs::create_directories(tmp);  // a folder that cannot be made fails now, not after simulating
    records.emplace(tmp, wants(spec, "requests"), wants(spec, "recoveries"),
                    std::move(deployments));
    options.sink = &*records;
    options.keep_records = wants(spec, "trace");
    std::vector<sim::RunResult> runs = sim::run_scenario(spec, compute, options);
    records->close();
    return runs;
  } catch (...) {
    records.reset();
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

int run(const RunCliOptions& o) {
  input::ScenarioSpec spec = o.scenario.empty() ? input::load_embedded_quickstart()
                                                : input::load_scenario_file(o.scenario);
  if (o.seed_given) spec.seed = parse_seed(o.seed, "--seed");
  if (o.no_trace) std::erase(spec.outputs.files, "trace");
  // Checked before simulating, so a clash costs nothing.
  const bool default_out = !o.out_given && spec.outputs.dir.empty();
  std::string out = o.out_given                 ? o.out
                    : !spec.outputs.dir.empty() ? spec.outputs.dir
                                                : default_out_dir(spec.name);
  std::vector<fs::path> inputs;
  if (!o.scenario.empty()) inputs.emplace_back(o.scenario);
  const fs::path tmp = reports::staging_folder(out, o.force, inputs);
  const InterruptCleanup on_interrupt(tmp);  // Ctrl-C leaves no half folder behind
  const auto compute = make_compute_costs(spec);
  if (!o.quiet) std::cout << "kvshift run: " << input::summarize(spec) << "\n";
  for (const std::string& n : spec.notes) std::cerr << "kvshift run: note: " << n << "\n";

  const auto wall_start = std::chrono::steady_clock::now();
  sim::RunOptions options;
  options.record_trace = wants(spec, "trace");
  options.progress = progress_reporter(o.quiet, wall_start);
  std::vector<std::string> streamed;
  for (const char* key : {"requests", "recoveries"}) {
    if (wants(spec, key)) streamed.emplace_back(key);
  }
  const std::vector<sim::RunResult> runs = simulate(spec, *compute, std::move(options), tmp);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const std::vector<cost_model::OpSource> sources = compute->sources();
  const auto summary = reports::run_summary(spec, runs, sources);
  std::vector<fs::path> written;
  try {
    reports::write_run_outputs(tmp, spec, runs, sources, streamed);
    if (const auto table = live_cost_table(*compute)) {
      reports::write_file_atomic(tmp / "live-costs.json", *table);
    }
    // report.html is drawn from summary.json; a run that does not write it has no page.
    // A failure here (disk full) is a failed run: exit 1.
    if (wants(spec, "summary")) reports::write_html_report(tmp);
    if (default_out) {
      out = publish_default(tmp, out);
    } else {
      reports::publish_folder(tmp, out);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  for (const auto& e : fs::directory_iterator(out)) written.push_back(e.path());
  std::int64_t events = 0;
  for (const auto& r : runs) events += r.events;
  if (!o.quiet) {
    std::cout << "\n" << reports::run_table(summary) << "\n";
    std::printf("simulated %.1f s x %zu strategies in %.2f s wall (%.3g events/s)\n",
                spec.duration.value, runs.size(), wall, wall > 0 ? events / wall : 0.0);
  }
  std::cout << "wrote " << written.size() << " files to " << out << "/\n";
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<RunCliOptions>();
  sub.add_option("scenario", o->scenario,
                 "Scenario JSON file (default: the embedded quickstart scenario)");
  sub.add_option("--out", o->out, "Output folder (default: kvshift-out/<scenario>-<timestamp>)")
      ->each([o](const std::string&) { o->out_given = true; });
  sub.add_option("--seed", o->seed, "Override the scenario's seed (0 to 2^64-1)")
      ->each([o](const std::string&) { o->seed_given = true; });
  sub.add_flag("--force", o->force,
               "Replace an existing --out folder that an earlier run wrote (atomically)");
  sub.add_flag("--no-trace", o->no_trace, "Do not write trace.json");
  sub.add_flag("--quiet", o->quiet, "Print only where the files went");
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"run", "Simulate a scenario under each strategy and write the results (the main job)", 10,
     setup}};

}  // namespace
}  // namespace kvshift::app
