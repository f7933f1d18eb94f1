// NetworkFabric: the Fabric of a real run — the scenario's nodes and links
// built into a sim::Topology and carried by the flow-level sim::Network
// (max-min sharing, latency first, re-routing and stalls on failures).
#pragma once

#include <memory>

#include "sim/network.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/spec.hpp"
#include "sim/topology.hpp"

namespace kvshift::sim {

/// The scenario's nodes (NodeId i = cluster.nodes[i]) and links, as a routable Topology.
Topology build_topology(const ClusterSpec& cluster, const std::string& gpu_model);

class NetworkFabric final : public Fabric {
 public:
  /// Node i of `cluster` becomes NodeId i; links keep their names.
  NetworkFabric(Simulator& sim, const ClusterSpec& cluster, const std::string& gpu_model);

  std::uint64_t send(NodeId src, NodeId dst, Bytes bytes, Done done) override;
  void cancel(std::uint64_t transfer) override;
  std::optional<cost_model::Path> path(NodeId src, NodeId dst) override;
  bool reachable(NodeId src, NodeId dst) override;
  BitsPerSecond available_bandwidth(NodeId src, NodeId dst) override;
  void fail_node(NodeId node) override;
  void repair_node(NodeId node) override;
  void degrade_link(const std::string& link, std::optional<BitsPerSecond> bandwidth,
                    std::optional<SimTime> latency) override;
  void fail_link(const std::string& link) override;
  void repair_link(const std::string& link) override;
  const std::vector<LinkCounter>& link_counters() override;

  const Topology& topology() const { return topology_; }
  Network& network() { return *network_; }

 private:
  LinkId link_id(const std::string& name) const;

  Topology topology_;
  std::unique_ptr<Network> network_;
  std::vector<LinkCounter> counters_;  ///< names built once; numbers refreshed per call
  /// Each transfer's Done, in a slot its callback names: a callback that captured the Done
  /// itself would not fit std::function's inline buffer, and a fleet run sends millions.
  std::vector<Done> dones_;
  std::vector<std::uint32_t> free_dones_;
  /// Transfers sent at `starting_at_` ns, which start in a later event of that instant: a move
  /// planned meanwhile (a burst of recoveries) shares their paths too.
  struct Starting {
    TransferId id;
    NodeId src, dst;
  };
  std::vector<Starting> starting_;
  std::int64_t starting_at_ = -1;
};

}  // namespace kvshift::sim
