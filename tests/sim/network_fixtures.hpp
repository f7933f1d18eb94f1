// Small helpers shared by the network tests: a chain topology, a request
// shorthand and an observer that counts every transfer's end.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/network.hpp"

namespace kvshift::sim::testing {

constexpr double kGbps = 1e9;

/// A chain n0 - n1 - ... with the given bandwidths (bit/s) and latencies.
inline Topology chain(const std::vector<double>& bw, const std::vector<SimTime>& lat = {},
                      Duplex duplex = Duplex::kFull) {
  Topology t;
  for (std::size_t i = 0; i <= bw.size(); ++i) {
    ClusterNode n;
    n.name = "n" + std::to_string(i);
    n.kind = NodeKind::kGpu;
    t.add_node(n);
  }
  for (std::size_t i = 0; i < bw.size(); ++i) {
    t.add_link(ClusterLink{"L" + std::to_string(i + 1), static_cast<NodeId>(i),
                           static_cast<NodeId>(i + 1), BitsPerSecond{bw[i]},
                           lat.empty() ? SimTime{0} : lat[i], duplex});
  }
  return t;
}

inline TransferRequest req(NodeId src, NodeId dst, std::int64_t bytes, SimTime start = {}) {
  TransferRequest r;
  r.src = src;
  r.dst = dst;
  r.size = Bytes{bytes};
  r.start = start;
  return r;
}

/// Counts every end; a transfer ending twice is a failure.
struct EndCounter : NetworkObserver {
  std::map<TransferId, int> ends;
  int stalls = 0, reroutes = 0, starts = 0;
  void on_started(const TransferInfo&) override { ++starts; }
  void on_stalled(const TransferInfo&) override { ++stalls; }
  void on_rerouted(const TransferInfo&) override { ++reroutes; }
  void on_done(const TransferInfo& i) override { ++ends[i.id]; }
};

}  // namespace kvshift::sim::testing
