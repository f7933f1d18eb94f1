// Cluster generators for the shapes capacity planners use: star, ring, two-tier
// leaf-spine (with oversubscription) and multi-site (sites joined by WAN links
// between their gateways). Each appends nodes and links to a Cluster under a
// name prefix, so shapes combine with each other and with explicit lists; a
// scenario's and a flows file's generators are these. Names and order:
//   star        "hub"; "gpu0".."gpu<n-1>", each linked to the hub ("gpu<i>-hub")
//   ring        "gpu0".."gpu<n-1>" (n >= 3); links "gpu<i>-gpu<i+1 mod n>"
//   leaf_spine  "leaf<l>", "spine<s>", then "gpu<i>" (numbered across leaves, leaf by leaf),
//               links "gpu<i>-leaf<l>", then "leaf<l>-spine<s>"
//   multi_site  per site "<site>/gw", then "<site>/gpu<i>" linked to it; then WAN links
//               "<a>/gw-<b>/gw" between every pair of sites (every node's `site` is set)
// (all names after the prefix; a link is named "<a>-<b>").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cluster.hpp"

namespace kvshift::sim {

/// Bandwidth, one-way latency and duplex of the links a generator makes.
struct LinkParams {
  BitsPerSecond bandwidth{100e9};
  SimTime latency{1'000};
  Duplex duplex = Duplex::kFull;
};

/// What a generated GPU node looks like (its name and site are set by the generator).
struct GpuNodeTemplate {
  std::string gpu_model = "h200";
  int gpu_count = 8;
  Bytes hbm_per_gpu{141LL * 1'000'000'000};
  Bytes host_memory{2LL << 40};
};

/// The nodes a generator made.
struct GeneratedNodes {
  std::vector<NodeId> gpus;      ///< GPU nodes in name order
  std::vector<NodeId> switches;  ///< hub / leaves then spines / gateways
};

/// `nodes` (>= 1) GPU nodes around one switch "<prefix>hub".
GeneratedNodes add_star(Cluster& c, int nodes, const LinkParams& link,
                        const GpuNodeTemplate& node = {}, const std::string& prefix = "");

/// `nodes` GPU nodes in a ring (node i linked to node i+1 mod n); needs nodes >= 3.
GeneratedNodes add_ring(Cluster& c, int nodes, const LinkParams& link,
                        const GpuNodeTemplate& node = {}, const std::string& prefix = "");

struct LeafSpineParams {
  int leaves = 2;
  int spines = 2;
  int nodes_per_leaf = 4;
  LinkParams host;  ///< node <-> leaf
  /// leaf downlink capacity / uplink capacity: each leaf-spine link gets
  /// nodes_per_leaf·host.bandwidth / (spines·oversubscription) ...
  double oversubscription = 1.0;
  /// ... unless given here.
  std::optional<BitsPerSecond> uplink_bandwidth;
  SimTime uplink_latency{1'000};
};

/// Every leaf linked to every spine; nodes_per_leaf GPU nodes per leaf.
GeneratedNodes add_leaf_spine(Cluster& c, const LeafSpineParams& p,
                              const GpuNodeTemplate& node = {}, const std::string& prefix = "");

/// One site of a multi-site cluster: `nodes` GPU nodes around its gateway switch.
struct SiteParams {
  std::string name;
  int nodes = 1;
  LinkParams lan;  ///< node <-> gateway
};

struct MultiSiteParams {
  std::vector<SiteParams> sites;  ///< >= 2, distinct non-empty names
  LinkParams wan;                 ///< gateway <-> gateway, full mesh
};

/// Sites "<prefix><site>/..." joined by WAN links between their gateways.
GeneratedNodes add_multi_site(Cluster& c, const MultiSiteParams& p,
                              const GpuNodeTemplate& node = {}, const std::string& prefix = "");

}  // namespace kvshift::sim
