// Runs NetCases through SimGrid's flow-level model (S4U), configured as plain
// max-min sharing so that it solves the same problem as sim::Network:
//   network/model:CM02, network/latency-factor:1, network/bandwidth-factor:1,
//   network/weight-S:0, network/crosstraffic:0, network/TCP-gamma:0.
// CM02 weights each flow's share by its route latency (an RTT bias, "sharing
// penalty"); to get plain max-min, SimGrid's links get zero latency and the
// route latency is paid as a pure delay before the communication starts (the
// driver actor sleeps), which is exactly kvshift's model. Bandwidths are given
// to SimGrid in bytes/s. All cases run in one simulation on disjoint hosts and
// links (SimGrid allows one engine per process). Routes are kvshift's
// (NetFlow::route), declared to SimGrid as explicit full-zone routes. A
// per-flow cap is a private link of that capacity on the flow's route, from a
// private sender host (SimGrid 3.32 ignores Comm::set_rate() on host-to-host
// communications); in max-min terms it is the same constraint.
// With SimgridOptions::one_case_at_a_time the cases run one after another in
// simulated time (case c starts when case c-1 has ended; its times are reported
// relative to its own start), so a benchmark can time and meter each case apart.
// With SimgridOptions::release_finished the driver keeps only the communications
// in flight (Comm::wait_any_for between launches, a finished one is dropped at
// once), as a long-running S4U program would, so SimGrid's memory follows the
// flows in flight rather than every flow the run has had.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "tests/sim/simgrid/net_case.hpp"

namespace kvshift::sim::testing {

struct SimgridRun {
  std::vector<std::vector<double>> finish_s;  ///< per case, per flow
  double wall_s = 0;                          ///< engine run time (platform build excluded)
  double cpu_s = 0;                           ///< process CPU time of the same span
  std::vector<double> case_cpu_s;             ///< per case (one_case_at_a_time only)
  std::vector<double> case_wall_s;            ///< per case (one_case_at_a_time only)
};

enum class SimgridPhase { kPlatformBegin, kPlatformEnd, kRunBegin, kRunEnd };

struct SimgridOptions {
  bool one_case_at_a_time = false;
  /// Hold only the communications in flight (a finished one is dropped at once).
  bool release_finished = false;
  /// Called around each case's platform build and (one_case_at_a_time) its run.
  std::function<void(std::size_t, SimgridPhase)> on_phase;
};

/// Runs every case (routes filled in) in one SimGrid simulation. Call once per process.
SimgridRun run_simgrid(const std::vector<NetCase>& cases, const SimgridOptions& options = {});

}  // namespace kvshift::sim::testing
