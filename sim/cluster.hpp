// The cluster as declared: its nodes and links, one vocabulary for every layer.
// A scenario file's "cluster" section, a flows file and the generators
// (sim/generators.hpp) all produce a Cluster; sim::Topology is built from one
// and adds the run-time state (what is up, current bandwidths) and routing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/units.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {

/// Index of a node in its Cluster (and Topology).
using NodeId = std::uint32_t;
/// Index of a link in its Cluster (and Topology).
using LinkId = std::uint32_t;

/// What a node is: a GPU server, a switch (forwards only) or a KV/predictor store.
enum class NodeKind { kGpu, kSwitch, kStorage };
/// "gpu", "switch", "storage".
std::string_view to_string(NodeKind k);

/// A node. The GPU fields are meaningful for kGpu nodes only.
struct ClusterNode {
  std::string name;
  NodeKind kind = NodeKind::kSwitch;
  std::string gpu_model;  ///< e.g. "h200" (empty in a scenario: its pool's or its own GPU)
  int gpu_count = 0;      ///< GPUs in the node
  Bytes hbm_per_gpu;      ///< HBM capacity of one GPU
  Bytes host_memory;      ///< host DRAM (gpu nodes: KV offload, replicas); storage: capacity
  std::string site;       ///< multi-site clusters: the node's site; else empty
  int pool = 0;           ///< gpu nodes of a scenario with pools: index of the node's pool
};

/// Full: each direction has the whole bandwidth. Half: both directions share it.
enum class Duplex { kFull, kHalf };

/// A link between two nodes, as declared (its run-time state is the Topology's).
struct ClusterLink {
  std::string name;
  NodeId a = 0;
  NodeId b = 0;
  BitsPerSecond bandwidth;
  SimTime latency;  ///< one way
  Duplex duplex = Duplex::kFull;
};

/// Nodes and links; a link's ends index `nodes`.
struct Cluster {
  std::vector<ClusterNode> nodes;
  std::vector<ClusterLink> links;
};

}  // namespace kvshift::sim
