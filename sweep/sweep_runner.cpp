// The sweep runner (see sweep_runner.hpp): a thread pool per rank, points
// sharded k mod ranks, summaries written as they finish, sweep.csv on rank 0.
#include "sweep/sweep_runner.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "reports/atomic_file.hpp"
#include "sweep/mpi_shard.hpp"
#include "sweep/sweep_table.hpp"

namespace kvshift::sweep {
namespace {

using Clock = std::chrono::steady_clock;
using Items = std::vector<std::pair<std::uint64_t, std::string>>;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> strategy_union(
    const std::vector<std::vector<reports::NamedMetrics>>& points) {
  std::set<std::string> names;
  for (const auto& point : points) {
    for (const reports::NamedMetrics& n : point) names.insert(n.strategy);
  }
  return {names.begin(), names.end()};
}

std::string csv_from(const SweepPlan& plan, const std::map<std::uint64_t, std::string>& texts,
                     std::vector<std::string>* strategies_out) {
  std::vector<std::uint64_t> ks, seeds;
  std::vector<std::vector<reports::NamedMetrics>> metrics;
  for (const auto& [k, text] : texts) {
    const nlohmann::json summary = nlohmann::json::parse(text);
    ks.push_back(k);
    seeds.push_back(summary.at("seed").get<std::uint64_t>());
    try {
      metrics.push_back(reports::strategies_from_json(summary));
    } catch (const InputError& e) {
      throw InputError("points/" + std::to_string(k) + "/summary.json: " + e.what());
    }
  }
  const std::vector<std::string> strategies = strategy_union(metrics);
  std::set<std::string> deployment_names;  // every point serves the same ones
  for (const auto& point : metrics) {
    for (const reports::NamedMetrics& n : point) {
      for (const auto& [name, use] : n.metrics.deployments) deployment_names.insert(name);
    }
  }
  const std::vector<std::string> deployments(deployment_names.begin(), deployment_names.end());
  std::string csv = sweep_header(plan.axes, strategies, deployments) + "\n";
  for (std::size_t i = 0; i < ks.size(); ++i) {
    csv += sweep_row(plan.axes, ks[i], seeds[i], strategies, metrics[i], deployments) + "\n";
  }
  if (strategies_out) *strategies_out = strategies;
  return csv;
}

// Runs `to_run` on a thread pool; returns (point, summary text) for each finished point.
Items run_local(const SweepPlan& plan, std::vector<input::ScenarioSpec>& specs,
                const std::vector<std::uint64_t>& to_run, const std::filesystem::path& dir,
                const CostFactory& costs, const RunnerOptions& options, Items& errors) {
  Items finished;
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t settled = 0;
  const auto start = Clock::now();
  boost::asio::thread_pool pool(static_cast<std::size_t>(std::max(options.jobs, 1)));
  for (std::uint64_t k : to_run) {
    boost::asio::post(pool, [&, k] {
      std::string text, error;
      if (!(options.stop && options.stop->load())) {
        try {
          text = simulate_point(specs[k], costs).dump(2) + "\n";
          specs[k] = input::ScenarioSpec{};  // free it
          reports::write_file_atomic(point_summary_path(dir, k), text);
        } catch (const std::exception& e) {
          error = "point " + std::to_string(k) + " (" + describe_point(plan, k) + "): " + e.what();
        }
      }
      std::lock_guard lock(mutex);
      if (!text.empty()) finished.emplace_back(k, std::move(text));
      if (!error.empty()) errors.emplace_back(k, std::move(error));
      ++settled;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  while (settled < to_run.size()) {
    cv.wait_for(lock, std::chrono::milliseconds(250));
    if (options.progress) {
      const Progress p{finished.size(), to_run.size(),
                       std::chrono::duration<double>(Clock::now() - start).count()};
      lock.unlock();
      options.progress(p);
      lock.lock();
    }
  }
  lock.unlock();
  pool.join();
  return finished;
}

}  // namespace

std::filesystem::path point_summary_path(const std::filesystem::path& dir, std::uint64_t k) {
  return dir / "points" / std::to_string(k) / "summary.json";
}

std::string sweep_csv_from_dir(const SweepPlan& plan, const std::filesystem::path& dir,
                               std::vector<std::string>* strategies) {
  std::map<std::uint64_t, std::string> texts;
  const std::uint64_t n = point_count(plan.axes);
  for (std::uint64_t k = 0; k < n; ++k) {
    const auto path = point_summary_path(dir, k);
    if (std::filesystem::exists(path)) texts[k] = read_text(path);
  }
  return csv_from(plan, texts, strategies);
}

SweepOutcome run_sweep(const SweepPlan& plan, const std::filesystem::path& dir,
                       const CostFactory& costs, const RunnerOptions& options) {
  const auto start = Clock::now();
  SweepOutcome out;
  out.points = point_count(plan.axes);
  std::vector<input::ScenarioSpec> specs;  // every point loaded (validated) before any runs
  specs.reserve(out.points);
  for (std::uint64_t k = 0; k < out.points; ++k) specs.push_back(load_point(plan, k));

  MpiWorld world;
  out.is_root = world.is_root();
  out.ranks = world.size();
  std::vector<std::uint64_t> done;
  if (world.is_root()) {
    reports::write_file_atomic(dir / "sweep.json", plan_to_json(plan).dump(2) + "\n");
    for (std::uint64_t k = 0; options.resume && k < out.points; ++k) {
      if (std::filesystem::exists(point_summary_path(dir, k))) done.push_back(k);
    }
  }
  done = world.broadcast(std::move(done));
  out.skipped = done.size();
  const std::set<std::uint64_t> done_set(done.begin(), done.end());
  // The i-th point still to run goes to rank i mod size (k mod size on a fresh sweep), so a
  // resume after a rank died spreads that rank's leftovers over every rank.
  std::vector<std::uint64_t> to_run;
  std::uint64_t left = 0;
  for (std::uint64_t k = 0; k < out.points; ++k) {
    if (done_set.count(k)) continue;
    if (left++ % static_cast<std::uint64_t>(world.size()) ==
        static_cast<std::uint64_t>(world.rank())) {
      to_run.push_back(k);
    }
  }
  const std::uint64_t remaining = out.points - out.skipped;
  if (world.is_root() && options.warn && remaining < static_cast<std::uint64_t>(world.size())) {
    options.warn(std::to_string(world.size()) + " MPI ranks for " + std::to_string(remaining) +
                 " points to simulate: " + std::to_string(world.size() - remaining) +
                 " rank(s) will have nothing to do");
  }

  Items errors;
  const Items finished = run_local(plan, specs, to_run, dir, costs, options, errors);
  const int stopped = world.max_all(options.stop && options.stop->load() ? 1 : 0);
  const Items all = world.gather(finished);
  const Items all_errors = world.gather(errors);
  out.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  out.simulated = all.size();
  if (!world.is_root()) {
    out.is_root = false;
    out.interrupted = stopped != 0;
    if (world.max_all(all_errors.empty() ? 0 : 1)) throw std::runtime_error("see rank 0");
    return out;
  }
  for (const auto& [k, text] : all) {
    if (!std::filesystem::exists(point_summary_path(dir, k))) {
      reports::write_file_atomic(point_summary_path(dir, k), text);
    }
  }
  world.max_all(all_errors.empty() ? 0 : 1);
  if (!all_errors.empty()) {
    std::string message = std::to_string(all_errors.size()) + " point(s) failed:";
    for (const auto& [k, e] : all_errors) message += "\n  " + e;
    throw std::runtime_error(message);
  }
  out.missing = out.points - out.skipped - out.simulated;
  out.interrupted = stopped != 0 && out.missing > 0;
  if (out.missing == 0) {
    std::map<std::uint64_t, std::string> texts(all.begin(), all.end());
    for (std::uint64_t k : done) texts[k] = read_text(point_summary_path(dir, k));
    reports::write_file_atomic(dir / "sweep.csv", csv_from(plan, texts, &out.strategies));
  }
  return out;
}

}  // namespace kvshift::sweep
