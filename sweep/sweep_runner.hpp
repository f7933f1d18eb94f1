// The sweep runner: validates every point, skips points already done (when
// resuming), runs the rest on a Boost.Asio thread_pool (and across MPI ranks
// when launched by mpirun), writes each finished point's summary.json under
// DIR/points/<k>/ at once (so an interrupt keeps it), and, on rank 0, writes
// sweep.csv once every point is done. Wall-clock figures are returned to the
// caller, never written into sweep.csv.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sweep/sweep_plan.hpp"

namespace kvshift::sweep {

/// Where a sweep stands, for a progress display.
struct Progress {
  std::uint64_t done = 0;   ///< points finished in this run (this rank)
  std::uint64_t total = 0;  ///< points this run (this rank) has to do
  double elapsed_s = 0;
};

struct RunnerOptions {
  int jobs = 1;                                   ///< worker threads per rank
  bool resume = false;                            ///< skip points whose summary.json exists
  const std::atomic<bool>* stop = nullptr;        ///< set (e.g. on SIGINT) to start no new point
  std::function<void(const Progress&)> progress;  ///< ~4 times a second, and at the end
  std::function<void(const std::string&)> warn;   ///< rank 0 warnings
};

struct SweepOutcome {
  std::uint64_t points = 0;     ///< in the whole sweep
  std::uint64_t skipped = 0;    ///< already done before this run
  std::uint64_t simulated = 0;  ///< by this run, all ranks
  std::uint64_t missing = 0;    ///< not done when this run ended (interrupted)
  bool interrupted = false;
  bool is_root = true;
  int ranks = 1;
  double wall_s = 0;
  std::vector<std::string> strategies;  ///< sweep.csv's strategy order
};

/// The summary file of point `k` under `dir`.
std::filesystem::path point_summary_path(const std::filesystem::path& dir, std::uint64_t k);

/// Runs the sweep into `dir`. Throws InputError for a bad point (before simulating
/// anything) and std::runtime_error when a point's simulation failed.
SweepOutcome run_sweep(const SweepPlan& plan, const std::filesystem::path& dir,
                       const CostFactory& costs, const RunnerOptions& options);

/// Rebuilds sweep.csv text from the points' summary files under `dir`.
std::string sweep_csv_from_dir(const SweepPlan& plan, const std::filesystem::path& dir,
                               std::vector<std::string>* strategies = nullptr);

}  // namespace kvshift::sweep
