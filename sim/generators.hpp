// Topology generators for the shapes capacity planners use: star, ring,
// two-tier leaf-spine (with oversubscription) and multi-site WAN (sites with an
// internal leaf-spine, joined by WAN links between site gateways). Each adds
// nodes and links to an existing Topology under a name prefix, so shapes can be
// combined with each other and with explicit lists. Names: "<prefix>gpu<i>",
// "<prefix>leaf<i>", "<prefix>spine<j>", "<prefix>hub", links "<a>-<b>".
#pragma once

#include <string>
#include <vector>

#include "sim/topology.hpp"

namespace kvshift::sim {

/// Bandwidth, one-way latency and duplex of the links a generator makes.
struct LinkParams {
  BitsPerSecond bandwidth{100e9};
  SimTime latency{1'000};
  LinkDuplex duplex = LinkDuplex::kFull;
};

/// What a generated GPU node looks like (its name is set by the generator).
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

/// `nodes` GPU nodes around one switch "<prefix>hub".
GeneratedNodes add_star(Topology& t, int nodes, const LinkParams& link,
                        const GpuNodeTemplate& node = {}, const std::string& prefix = "");

/// `nodes` GPU nodes in a ring (node i linked to node i+1 mod n); needs nodes >= 3.
GeneratedNodes add_ring(Topology& t, int nodes, const LinkParams& link,
                        const GpuNodeTemplate& node = {}, const std::string& prefix = "");

struct LeafSpineParams {
  int leaves = 2;
  int spines = 2;
  int nodes_per_leaf = 4;
  LinkParams host;  ///< node <-> leaf
  /// leaf downlink capacity / uplink capacity: each leaf-spine link gets
  /// nodes_per_leaf·host.bandwidth / (spines·oversubscription).
  double oversubscription = 1.0;
  SimTime uplink_latency{1'000};
};

/// Every leaf linked to every spine; nodes_per_leaf GPU nodes per leaf.
GeneratedNodes add_leaf_spine(Topology& t, const LeafSpineParams& p,
                              const GpuNodeTemplate& node = {}, const std::string& prefix = "");

struct WanParams {
  int sites = 2;
  LeafSpineParams site;  ///< each site's fabric
  LinkParams gateway;    ///< each spine <-> its site gateway
  LinkParams wan;        ///< gateway <-> gateway, full mesh
};

/// Sites "<prefix>site<i>/..." joined by WAN links between their gateways.
GeneratedNodes add_multi_site(Topology& t, const WanParams& p, const GpuNodeTemplate& node = {},
                              const std::string& prefix = "");

}  // namespace kvshift::sim
