// NetCase: a topology and a flow set in plain numbers, the common input of the
// kvshift network model and of SimGrid in the differential test and the
// network benchmark. run_kvshift() runs a case through sim::Network and fills
// in each flow's route (kvshift's routing), which SimGrid then follows too, so
// the two models are compared on the sharing problem, not on routing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/network.hpp"

namespace kvshift::sim::testing {

struct NetLink {
  int a = 0;
  int b = 0;
  double bandwidth_bps = 0;
  std::int64_t latency_ns = 0;
  bool half_duplex = false;
};

struct NetFlow {
  int src = 0;
  int dst = 0;
  std::int64_t bytes = 0;
  std::int64_t start_ns = 0;
  double cap_bps = 0;                       ///< 0: none
  std::vector<std::pair<int, bool>> route;  ///< (link, forward), filled by run_kvshift
  std::int64_t route_latency_ns = 0;        ///< filled by run_kvshift
};

struct NetCase {
  std::string name;
  int nodes = 0;
  std::vector<NetLink> links;
  std::vector<NetFlow> flows;
};

struct KvshiftRun {
  std::vector<double> finish_s;  ///< per flow
  std::uint64_t events = 0;
  std::uint64_t reshares = 0;
  std::uint64_t reshared_flows = 0;
};

/// The case as a Topology (nodes "n<i>", links "l<j>").
Topology make_topology(const NetCase& c);

/// Runs `c` through sim::Network; fills every flow's route and route latency.
KvshiftRun run_kvshift(NetCase& c, bool record_utilisation = true);

}  // namespace kvshift::sim::testing
