// `kvshift sweep`: many simulations of one scenario, the cartesian product of
// `--set POINTER=v1,v2,...` values, on a thread pool (and across MPI ranks
// when started by mpirun), into DIR/sweep.csv + DIR/points/<k>/summary.json +
// DIR/report.html. `--analytic` evaluates the cost model's closed forms over
// bandwidth x context x omitted groups instead. Ctrl-C keeps finished points;
// `--resume DIR` continues. Wall-clock figures go to the console and
// DIR/wall.json, never into sweep.csv.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "apps/kvshift/support_out_folder.hpp"
#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/scenario_loader.hpp"
#include "input/spec_files.hpp"
#include "reports/atomic_file.hpp"
#include "reports/html_report.hpp"
#include "sweep/analytic_sweep.hpp"
#include "sweep/mpi_shard.hpp"
#include "sweep/replicate_means.hpp"
#include "sweep/sweep_runner.hpp"

namespace kvshift::app {
namespace {

std::atomic<bool> g_interrupted{false};

/// The most rows analytic.csv may hold (about 1 GB of text).
constexpr std::uint64_t kMaxPointRows = 10000000;

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

namespace fs = std::filesystem;

struct SweepCliOptions {
  std::string scenario, out, resume;
  bool out_given = false, force = false;
  std::vector<std::string> analytic_only;  ///< the --analytic options typed (names)
  std::vector<std::string> sets;
  int jobs = 0;
  bool analytic = false, no_report = false, quiet = false;
  std::string bandwidth = "1Mbps..100Gbps:60", tokens = "128..32768:40", omit = "0..4";
  std::string model, gpu, latency = "100us";
  std::uint64_t max_rows = 1000000;
  std::string seed;  ///< the workload seed of every point (default: the scenario's)
  bool seed_given = false;
  std::uint64_t replicates = 1;
};

std::string clock_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return buf;
}

// A bar on a terminal; a plain line every 10 % (or 30 s) otherwise.
std::function<void(const sweep::Progress&)> progress_printer(bool quiet) {
  if (quiet) return {};
  const bool tty = ::isatty(STDERR_FILENO);
  auto last = std::make_shared<std::pair<int, double>>(-1, 0.0);
  return [tty, last](const sweep::Progress& p) {
    const double rate = p.elapsed_s > 0 ? p.done / p.elapsed_s : 0;
    const double eta = rate > 0 ? (p.total - p.done) / rate : 0;
    const int tenth = p.total ? static_cast<int>(10 * p.done / p.total) : 10;
    if (tty) {
      const int width = 30, fill = p.total ? static_cast<int>(width * p.done / p.total) : width;
      std::fprintf(stderr, "\r  [%s%s] %llu/%llu points  %.2f points/s  ETA %s   ",
                   std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(),
                   (unsigned long long)p.done, (unsigned long long)p.total, rate,
                   clock_text(eta).c_str());
      if (p.done == p.total) std::fputc('\n', stderr);
    } else if (p.elapsed_s >= 2 && (tenth != last->first || p.elapsed_s - last->second > 30)) {
      std::fprintf(stderr, "  %llu/%llu points done, %.2f points/s, ETA %s\n",
                   (unsigned long long)p.done, (unsigned long long)p.total, rate,
                   clock_text(eta).c_str());
      *last = {tenth, p.elapsed_s};
    }
  };
}

// Writes report.html into `dir` (which may be staged); says where it will be under `shown`.
void write_report(const fs::path& dir, bool quiet, const fs::path& shown) {
  try {
    reports::write_html_report(dir);
    if (!quiet) std::cout << "report: " << (shown / "report.html").string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kvshift: warning: no report.html: " << e.what() << "\n";
  }
}

// The model, GPU and methods priced: the scenario's (or qwen2.5-1.5b on an h100), then --model,
// --gpu and --latency.
sweep::AnalyticSetup analytic_setup(const SweepCliOptions& o) {
  sweep::AnalyticSetup setup;
  if (!o.scenario.empty()) {
    const input::ScenarioSpec spec = input::load_scenario_file(o.scenario);
    if (spec.deployments.size() > 1 && o.model.empty()) {
      throw InputError(o.scenario +
                       ": it serves several models; the analytic sweep prices one: "
                       "name it with --model");
    }
    setup.model = spec.model;
    setup.gpu = spec.gpu;
    if (spec.risk_kv) setup.predictor_dtype = spec.risk_kv->predictor_dtype;
    if (spec.proxy_kv) setup.retention = spec.proxy_kv->retention;
  } else {
    setup.model = input::resolve_model("qwen2.5-1.5b");
    setup.gpu = input::resolve_gpu("h100");
  }
  if (!o.model.empty()) setup.model = input::resolve_costed_model(o.model);
  if (!o.gpu.empty()) setup.gpu = input::resolve_gpu(o.gpu);
  setup.latency = parse_duration(o.latency, "--latency");
  return setup;
}

// The map's files into the staging folder `tmp`, then renamed into place as `dir`.
void write_analytic(const SweepCliOptions& o, const sweep::AnalyticSetup& setup,
                    const sweep::AnalyticResult& r, const fs::path& tmp, const fs::path& dir) {
  try {
    reports::write_file_atomic(tmp / "crossover.csv", r.crossover_csv);
    reports::write_file_atomic(tmp / "winners.csv", r.winners_csv);
    if (!r.points_csv.empty()) reports::write_file_atomic(tmp / "analytic.csv", r.points_csv);
    // What was swept; it also marks the folder as kvshift's, so --force may replace it.
    const nlohmann::json what = {{"model", setup.model.name}, {"gpu", setup.gpu.name},
                                 {"latency", o.latency},      {"bandwidth", o.bandwidth},
                                 {"tokens", o.tokens},        {"omit", o.omit}};
    reports::write_file_atomic(tmp / "sweep.json",
                               nlohmann::json{{"analytic", what}}.dump(2) + "\n");
    if (!o.no_report) write_report(tmp, o.quiet, dir);
    reports::publish_folder(tmp, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

int run_analytic(const SweepCliOptions& o) {
  const sweep::AnalyticSetup setup = analytic_setup(o);
  const sweep::AnalyticGrid grid{sweep::parse_bandwidth_grid(o.bandwidth, "--bandwidth"),
                                 sweep::parse_token_grid(o.tokens, "--tokens"),
                                 sweep::parse_int_grid(o.omit, "--omit")};
  const std::uint64_t points =
      grid.bandwidths_bps.size() * grid.tokens.size() * grid.omitted_groups.size();
  if (o.max_rows > kMaxPointRows) {
    throw InputError("--max-rows: at most " + std::to_string(kMaxPointRows) +
                     " (analytic.csv is built in memory; got " + std::to_string(o.max_rows) + ")");
  }
  const bool with_points = points <= o.max_rows;
  // The folder is judged before the work (an existing --out costs nothing).
  const fs::path dir = o.out_given ? fs::path(o.out) : fresh_default_dir("analytic-sweep");
  const fs::path tmp = reports::staging_folder(dir, o.force);
  const auto start = std::chrono::steady_clock::now();
  sweep::AnalyticResult r;
  try {
    r = sweep::run_analytic(setup, grid, o.jobs, with_points);
  } catch (...) {
    std::error_code ec;
    if (!o.out_given) fs::remove(dir, ec);  // the fresh default folder, still empty
    throw;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "analytic sweep: %s on %s, %llu points (%zu bandwidths x %zu context lengths x %zu "
      "omitted-group counts) in %.3f s wall (%.3g points/s)\n",
      setup.model.name.c_str(), setup.gpu.name.c_str(), (unsigned long long)r.points,
      grid.bandwidths_bps.size(), grid.tokens.size(), grid.omitted_groups.size(), wall,
      wall > 0 ? r.points / wall : 0.0);
  if (!with_points) {
    std::printf(
        "analytic.csv not written: %llu points > --max-rows %llu (crossover.csv and winners.csv "
        "hold the map)\n",
        (unsigned long long)points, (unsigned long long)o.max_rows);
  }
  write_analytic(o, setup, r, tmp, dir);
  std::cout << "wrote " << dir.string() << "/{crossover.csv,winners.csv"
            << (with_points ? ",analytic.csv" : "") << "}\n";
  return 0;
}

// The flags of the other mode are refused, not ignored.
void check_mode(const SweepCliOptions& o) {
  if (o.analytic && (!o.sets.empty() || !o.resume.empty() || o.seed_given || o.replicates != 1)) {
    throw InputError(
        "--analytic: takes --bandwidth/--tokens/--omit, not --set, --resume, --seed or "
        "--replicates (the closed forms have no workload)");
  }
  if (!o.analytic && !o.analytic_only.empty()) {
    throw InputError(o.analytic_only.front() +
                     ": only with --analytic (a simulated sweep varies its scenario with --set, "
                     "e.g. --set /cluster/star/bandwidth=1Gbps,10Gbps)");
  }
}

// The plan saved in the --resume folder.
sweep::SweepPlan resumed_plan(const SweepCliOptions& o) {
  if (o.out_given || o.force) {
    const std::string flag = o.out_given ? "--out" : "--force";
    throw InputError(flag + " and --resume: a resumed sweep continues in its own folder " +
                     o.resume + "; drop " + flag);
  }
  if (!o.scenario.empty() || !o.sets.empty() || o.seed_given || o.replicates != 1) {
    throw InputError("--resume: continues the sweep saved in " + o.resume +
                     "; drop SCENARIO, --set, --seed and --replicates");
  }
  const fs::path saved = fs::path(o.resume) / "sweep.json";
  if (!fs::exists(saved)) throw InputError("--resume: " + saved.string() + " does not exist");
  const nlohmann::json j = input::read_json_file(saved.string());
  if (j.contains("analytic")) {
    throw InputError("--resume: " + o.resume +
                     " holds an analytic sweep, which has nothing to resume (run it again with "
                     "--out and --force)");
  }
  return sweep::plan_from_json(j, saved.string());
}

// A new plan: SCENARIO, its --set axes, --seed and --replicates.
sweep::SweepPlan new_plan(const SweepCliOptions& o) {
  if (o.sets.empty()) throw InputError("--set: give at least one POINTER=v1,v2,... to sweep");
  sweep::SweepPlan plan = sweep::make_plan(o.scenario, o.sets);
  if (o.seed_given) {
    for (const std::string& set : o.sets) {
      if (set.rfind("/seed=", 0) == 0)
        throw InputError("--seed and --set " + set + ": both set the seed; drop one");
    }
    plan.base["seed"] = parse_seed(o.seed, "--seed");
  }
  if (o.replicates != 1) sweep::add_replicates(plan, o.replicates);
  return plan;
}

// wall.json, the summary line, sweep_means.csv for replicates, and the report.
void finish(const SweepCliOptions& o, const sweep::SweepPlan& plan, const fs::path& dir,
            const sweep::SweepOutcome& r, int jobs) {
  const double rate = r.wall_s > 0 ? r.simulated / r.wall_s : 0;
  reports::write_file_atomic(dir / "wall.json", nlohmann::json{{"wall_s", r.wall_s},
                                                               {"points_simulated", r.simulated},
                                                               {"points_per_s", rate},
                                                               {"jobs", jobs},
                                                               {"ranks", r.ranks}}
                                                        .dump(2) +
                                                    "\n");
  if (!o.quiet) {
    std::printf(
        "sweep: %llu points (%llu simulated now, %llu already done) on %d rank(s) x %d thread(s) "
        "in %.2f s wall (%.3g points/s)\n",
        (unsigned long long)r.points, (unsigned long long)r.simulated,
        (unsigned long long)r.skipped, r.ranks, jobs, r.wall_s, rate);
  }
  std::cout << "wrote " << (dir / "sweep.csv").string() << "\n";
  const bool replicated = std::any_of(plan.axes.begin(), plan.axes.end(),
                                      [](const sweep::Axis& a) { return a.pointer == "/seed"; });
  if (replicated) {
    std::ifstream in(dir / "sweep.csv", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    reports::write_file_atomic(dir / "sweep_means.csv", sweep::replicate_means_csv(text.str()));
    std::cout << "wrote " << (dir / "sweep_means.csv").string()
              << " (mean and 95 % interval over the /seed replicates)\n";
  }
  if (!o.no_report) write_report(dir, o.quiet, dir);
}

int run(const SweepCliOptions& o) {
  check_mode(o);
  if (o.analytic) return run_analytic(o);
  // From here on Ctrl-C stops the sweep cleanly, even during planning (the runner then
  // saves the plan and stops before the first point).
  std::signal(SIGINT, on_sigint);
  const bool resume = !o.resume.empty();
  const sweep::SweepPlan plan = resume ? resumed_plan(o) : new_plan(o);
  if (!resume && !o.out_given && sweep::launched_by_mpirun())
    throw InputError("--out: under mpirun every rank writes into one folder; name it with --out");
  const bool made_default = !resume && !o.out_given;
  const fs::path dir = resume         ? fs::path(o.resume)
                       : made_default ? fresh_default_dir("sweep")
                                      : fs::path(o.out);
  // Rank 0 alone judges and replaces a new sweep's folder: the other ranks may start after it
  // began writing there.
  std::optional<ReplacedFolder> out_folder;
  if (!resume && sweep::rank_from_environment() == 0) {
    std::vector<fs::path> inputs;
    if (!o.scenario.empty()) inputs.emplace_back(o.scenario);
    out_folder.emplace(dir, o.force, inputs);
  }
  sweep::RunnerOptions options;
  options.jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.resume = resume;
  options.stop = &g_interrupted;
  options.warn = [](const std::string& w) { std::cerr << "kvshift: warning: " << w << "\n"; };
  options.progress = progress_printer(o.quiet || sweep::rank_from_environment() != 0);
  sweep::SweepOutcome r;
  try {
    r = sweep::run_sweep(plan, dir, shared_cost_factory(), options);
  } catch (...) {
    std::error_code ec;
    if (made_default && fs::is_empty(dir, ec)) fs::remove(dir, ec);  // nothing ran: no trace
    throw;
  }
  if (out_folder) out_folder->keep();
  std::signal(SIGINT, SIG_DFL);
  if (!r.is_root) return r.interrupted ? 130 : 0;
  if (r.interrupted) {
    std::cerr << "kvshift: interrupted: " << (r.skipped + r.simulated) << " of " << r.points
              << " points done (kept under " << (dir / "points").string() << ")\n"
              << "resume with: kvshift sweep --resume " << dir.string() << "\n";
    return 130;
  }
  finish(o, plan, dir, r, options.jobs);
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<SweepCliOptions>();
  sub.add_option("scenario", o->scenario, "Scenario JSON file (default: the embedded quickstart)");
  sub.add_option(
      "--set", o->sets,
      "POINTER=v1,v2,...: values of one knob (JSON pointer, * for every element); repeat for "
      "a cartesian product, e.g. --set /cluster/star/bandwidth=1Gbps,10Gbps");
  sub.add_option("--jobs,-j", o->jobs, "Worker threads (default: all cores)");
  sub.add_option("--out", o->out,
                 "Output folder, refused if it exists (default: a fresh "
                 "kvshift-out/sweep-<time>, or analytic-sweep-<time>)")
      ->each([o](const std::string&) { o->out_given = true; });
  sub.add_flag("--force", o->force, "Replace an existing --out folder that kvshift wrote");
  sub.add_option("--resume", o->resume,
                 "Continue the sweep in this folder, skipping points already done (no --out)");
  sub.add_flag("--analytic", o->analytic,
               "Evaluate the cost model's closed forms instead of simulating");
  sub.add_option("--bandwidth", o->bandwidth, "--analytic: LO..HI:N (log-spaced) or a list")
      ->capture_default_str()
      ->each([o](const std::string&) { o->analytic_only.push_back("--bandwidth"); });
  sub.add_option("--tokens", o->tokens, "--analytic: context lengths, LO..HI:N or a list")
      ->capture_default_str()
      ->each([o](const std::string&) { o->analytic_only.push_back("--tokens"); });
  sub.add_option("--omit", o->omit, "--analytic: omitted group counts, LO..HI or a list")
      ->capture_default_str()
      ->each([o](const std::string&) { o->analytic_only.push_back("--omit"); });
  sub.add_option("--model", o->model,
                 "--analytic: model (default: the scenario's, else qwen2.5-1.5b)")
      ->each([o](const std::string&) { o->analytic_only.push_back("--model"); });
  sub.add_option("--gpu", o->gpu, "--analytic: receiving GPU (default: the scenario's, else h100)")
      ->each([o](const std::string&) { o->analytic_only.push_back("--gpu"); });
  sub.add_option("--latency", o->latency, "--analytic: one-way path latency")
      ->capture_default_str()
      ->each([o](const std::string&) { o->analytic_only.push_back("--latency"); });
  sub.add_option("--max-rows", o->max_rows,
                 "--analytic: write analytic.csv only up to this many points")
      ->capture_default_str()
      ->each([o](const std::string&) { o->analytic_only.push_back("--max-rows"); });
  sub.add_flag("--no-report", o->no_report, "Do not write report.html");
  sub.add_option("--seed", o->seed,
                 "Workload seed of every point (default: the scenario's; all points share it)")
      ->each([o](const std::string&) { o->seed_given = true; });
  sub.add_option("--replicates", o->replicates,
                 "Run each point with N seeds (a /seed axis) and write sweep_means.csv "
                 "with means and 95 % intervals")
      ->capture_default_str();
  sub.add_flag("--quiet", o->quiet, "No progress and no summary line");
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"sweep", "Simulate a scenario over a grid of settings (threads, or MPI ranks under mpirun)",
     20, setup}};

}  // namespace
}  // namespace kvshift::app
