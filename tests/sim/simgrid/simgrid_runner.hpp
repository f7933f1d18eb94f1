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
#pragma once

#include <vector>

#include "tests/sim/simgrid/net_case.hpp"

namespace kvshift::sim::testing {

struct SimgridRun {
  std::vector<std::vector<double>> finish_s;  ///< per case, per flow
  double wall_s = 0;                          ///< engine run time (platform build excluded)
  double cpu_s = 0;                           ///< process CPU time of the same span
};

/// Runs every case (routes filled in) in one SimGrid simulation. Call once per process.
SimgridRun run_simgrid(const std::vector<NetCase>& cases);

}  // namespace kvshift::sim::testing
