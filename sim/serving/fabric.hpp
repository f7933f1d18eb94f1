// Fabric: the serving model's view of the network — move bytes between nodes,
// ask what a path looks like now, change node and link state. The flow-level
// network (sim/network.hpp) implements it for real runs; keeping the serving
// model behind this seam keeps it independent of how contention is modelled.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/latency.hpp"
#include "cost_model/units.hpp"
#include "sim/cluster.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {

/// Cumulative delivered bytes on one link direction (for utilisation samples).
struct LinkCounter {
  std::string name;          ///< "a->b" for one direction of link a-b
  double capacity_bps = 0;   ///< current capacity
  double allocated_bps = 0;  ///< rate allocated to flows now
  std::int64_t bytes = 0;    ///< carried up to now
};

class Fabric {
 public:
  /// Called once per transfer: delivered (true) or failed (false, with a reason).
  using Done = std::function<void(bool delivered, const std::string& reason)>;
  virtual ~Fabric() = default;

  /// Starts moving `bytes` from node `src` to node `dst` (node indices of the scenario).
  /// A zero-byte transfer still pays the path latency. Returns a handle for cancel().
  virtual std::uint64_t send(NodeId src, NodeId dst, Bytes bytes, Done done) = 0;
  /// Cancels a transfer in flight; its Done is not called.
  virtual void cancel(std::uint64_t transfer) = 0;
  /// The uncontended path now (one-way latency, bottleneck bandwidth), or empty if unreachable.
  virtual std::optional<cost_model::Path> path(NodeId src, NodeId dst) = 0;
  /// Whether a path exists now (path() without pricing it).
  virtual bool reachable(NodeId src, NodeId dst) = 0;
  /// Bandwidth a new flow would get now on that path (max-min share estimate), for decisions;
  /// zero when there is no path.
  virtual BitsPerSecond available_bandwidth(NodeId src, NodeId dst) = 0;

  virtual void fail_node(NodeId node) = 0;
  virtual void repair_node(NodeId node) = 0;
  /// Link by scenario name: degrade (new bandwidth and/or one-way latency), fail, repair.
  virtual void degrade_link(const std::string& link, std::optional<BitsPerSecond> bandwidth,
                            std::optional<SimTime> latency) = 0;
  virtual void fail_link(const std::string& link) = 0;
  virtual void repair_link(const std::string& link) = 0;

  /// Cumulative counters per link direction, in a fixed order (refreshed by each call; the
  /// names never change, so a sampler can keep only the numbers).
  virtual const std::vector<LinkCounter>& link_counters() = 0;
};

}  // namespace kvshift::sim
