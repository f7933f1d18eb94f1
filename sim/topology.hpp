// Topology: the cluster as a Boost.Graph multigraph of nodes (GPU nodes,
// switches, storage/replica nodes) and links (bandwidth, one-way latency,
// full or half duplex), with the run-time state that failures change (link
// bandwidth, link up/down, node up/down) and deterministic routing.
//
// Routing: shortest path by latency, ties broken by hop count, then by link id
// (walking back from the destination, the smallest-id link that keeps the
// path shortest is taken), computed with Boost's Dijkstra on the graph of
// usable links (up, both ends up) and cached per (source, destination) until a
// change that can alter routes (a link or node failing or coming back, a link's
// latency changing, a new link). Bandwidth changes do not move routes (routing
// is by latency). A host's (a node on one link) shortest-path tree is its
// neighbour's, one link further: a fleet of 10,000 hosts runs Dijkstra only
// from its switches.
// ECMP (ecmp_route): among the same shortest paths, a per-flow hash picks one,
// hop by hop walking back from the destination (at each node, the links that
// keep the path shortest, in id order, indexed by a mix of the hash and the
// node), as switches hash a flow's 5-tuple; one flow keeps one path.
// Every node may forward traffic. Left out: per-packet spraying, weighted or
// unequal-cost multipath, link costs other than latency, per-node forwarding
// capacity.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cost_model/units.hpp"
#include "sim/cluster.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {

/// One link of a route and the direction it is crossed in.
struct Hop {
  LinkId link = 0;
  bool forward = true;  ///< crossed from `a` to `b`
  constexpr bool operator==(const Hop&) const = default;
};

/// A path from `src` to `dst`.
struct Route {
  NodeId src = 0;
  NodeId dst = 0;
  std::vector<Hop> hops;
  SimTime latency;  ///< sum of the links' one-way latencies
};

class Topology {
 public:
  Topology() = default;
  /// The cluster's nodes and links, in order (a NodeId or LinkId is its index there).
  explicit Topology(const Cluster& cluster);

  /// Adds a node; throws InputError on an empty or duplicate name.
  NodeId add_node(ClusterNode spec);
  /// Adds a switch named `name`.
  NodeId add_switch(std::string name);
  /// Adds a link; throws InputError for an unknown node, a self-loop, bandwidth <= 0,
  /// latency < 0 or a duplicate name. An empty name becomes "L<id>".
  LinkId add_link(ClusterLink spec);
  /// add_link with the ends given by node name.
  LinkId add_link(std::string name, std::string_view a, std::string_view b, BitsPerSecond bandwidth,
                  SimTime latency, Duplex duplex = Duplex::kFull);

  std::size_t node_count() const { return nodes_.size(); }
  std::size_t link_count() const { return links_.size(); }
  const ClusterNode& node(NodeId n) const { return nodes_.at(n); }
  /// A link as declared (its current bandwidth and latency: bandwidth(l), latency(l)).
  const ClusterLink& link(LinkId l) const { return links_.at(l); }
  std::optional<NodeId> find_node(std::string_view name) const;
  std::optional<LinkId> find_link(std::string_view name) const;
  /// find_node that throws InputError naming `field` when the node is unknown.
  NodeId node_id(std::string_view name, std::string_view field = "node") const;
  /// Nodes of one kind, in id order.
  std::vector<NodeId> nodes_of_kind(NodeKind k) const;

  // --- run-time state -------------------------------------------------------
  /// Current bandwidth (the declared one until changed).
  BitsPerSecond bandwidth(LinkId l) const { return state_.at(l).bandwidth; }
  /// Current one-way latency (the declared one until changed).
  SimTime latency(LinkId l) const { return state_.at(l).latency; }
  bool link_up(LinkId l) const { return state_.at(l).up; }
  bool node_up(NodeId n) const { return node_up_.at(n); }
  /// Up, and both ends up.
  bool link_usable(LinkId l) const;
  /// Changes a link's bandwidth (> 0; use set_link_up(false) for an outage).
  void set_link_bandwidth(LinkId l, BitsPerSecond bw);
  /// Changes a link's one-way latency (>= 0); routes are recomputed, as routing is by latency.
  void set_link_latency(LinkId l, SimTime latency);
  void set_link_up(LinkId l, bool up);
  void set_node_up(NodeId n, bool up);
  /// Bumped by every change that can alter routes.
  std::uint64_t routing_version() const { return routing_version_; }

  // --- routing --------------------------------------------------------------
  /// The route from `src` to `dst` over usable links, or nullptr when none exists
  /// (or an end is down). src == dst gives an empty route. The pointer stays valid
  /// until the next routing change.
  const Route* route(NodeId src, NodeId dst) const;
  /// One of the shortest paths from `src` to `dst` (same latency and hop count as route()),
  /// picked by `flow_hash`; deterministic; nullopt when route() is nullptr. Not cached.
  std::optional<Route> ecmp_route(NodeId src, NodeId dst, std::uint64_t flow_hash) const;
  /// Builds an explicit route from link ids; throws InputError unless the links form a
  /// connected walk from `src` to `dst`.
  Route make_route(NodeId src, NodeId dst, const std::vector<LinkId>& links) const;
  /// Smallest current bandwidth along `r` (infinite for an empty route).
  BitsPerSecond bottleneck(const Route& r) const;
  /// True when every link of `r` is usable.
  bool usable(const Route& r) const;

  /// Resource (sharing) index of crossing `h`: full duplex links have one per direction,
  /// half duplex links one for both. Indices are < 2·link_count().
  static std::uint32_t channel(const Hop& h, Duplex d) {
    return 2 * h.link + ((d == Duplex::kFull && !h.forward) ? 1u : 0u);
  }
  std::uint32_t channel(const Hop& h) const { return channel(h, links_[h.link].duplex); }

 private:
  struct LinkState {
    BitsPerSecond bandwidth;
    SimTime latency;
    bool up = true;
  };
  /// Undirected multigraph; each edge carries its LinkId.
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                            boost::property<boost::edge_index_t, LinkId>>;
  /// Shortest (latency, hops) from one source to every node; latency < 0: unreachable.
  struct SourceTree {
    std::vector<std::int64_t> latency;
    std::vector<std::uint32_t> hops;
  };

  void invalidate_routes();
  const SourceTree& tree(NodeId src) const;
  SourceTree dijkstra_tree(NodeId src) const;
  /// A node on one link, whose neighbour has others: no shortest path passes through it.
  bool is_host(NodeId n) const;
  /// A host's tree, from its neighbour's.
  SourceTree host_tree(NodeId src) const;
  /// route() without the per-source memo: the pair cache, else a walk of src's tree.
  const Route* cached_route(NodeId src, NodeId dst) const;

  std::vector<ClusterNode> nodes_;
  std::vector<ClusterLink> links_;
  std::vector<LinkState> state_;
  std::vector<char> node_up_;
  std::unordered_map<std::string, NodeId> node_by_name_;
  std::unordered_map<std::string, LinkId> link_by_name_;
  std::uint64_t routing_version_ = 0;

  Graph graph_;
  static constexpr std::size_t kMaxTrees = 256;
  mutable std::unordered_map<NodeId, SourceTree> trees_;
  mutable std::deque<NodeId> tree_order_;  ///< trees_' sources, oldest first (evicted first)
  mutable std::unordered_map<std::uint64_t, std::optional<Route>> routes_;
  /// Per source, the last pair route() answered: a source mostly sends to one place (a
  /// GPU streams to its replica node), and one slot by index beats a hash lookup that
  /// misses the cache in a fleet of 10,000 sources. Valid while `version` is current
  /// (routes_' entries, which `route` points into, are only erased by routing changes).
  struct LastRoute {
    std::uint64_t version = ~std::uint64_t{0};
    NodeId dst = 0;
    const Route* route = nullptr;
  };
  mutable std::vector<LastRoute> last_route_;
};

}  // namespace kvshift::sim
