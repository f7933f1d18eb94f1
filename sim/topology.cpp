// Topology: construction checks, run-time state and cached Dijkstra routing.
#include "sim/topology.hpp"

#include <algorithm>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <cmath>
#include <limits>

#include "cost_model/input_error.hpp"

namespace kvshift::sim {
namespace {

/// Lexicographic path length: latency first, then hop count.
struct Dist {
  std::int64_t latency = 0;
  std::uint32_t hops = 0;
};
constexpr Dist kInfinite{std::numeric_limits<std::int64_t>::max(),
                         std::numeric_limits<std::uint32_t>::max()};

struct DistLess {
  bool operator()(const Dist& x, const Dist& y) const {
    return x.latency < y.latency || (x.latency == y.latency && x.hops < y.hops);
  }
};
struct DistPlus {
  Dist operator()(const Dist& x, const Dist& y) const {
    if (x.latency == kInfinite.latency || y.latency == kInfinite.latency) return kInfinite;
    return {x.latency + y.latency, x.hops + y.hops};
  }
};

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kSwitch:
      return "switch";
    case NodeKind::kStorage:
      return "storage";
  }
  return "?";
}

Topology::Topology(const Cluster& cluster) {
  for (const ClusterNode& n : cluster.nodes) add_node(n);
  for (const ClusterLink& l : cluster.links) add_link(l);
}

NodeId Topology::add_node(ClusterNode spec) {
  if (spec.name.empty()) throw InputError("node: name must not be empty");
  if (node_by_name_.count(spec.name))
    throw InputError("node \"" + spec.name + "\": duplicate name");
  if (spec.gpu_count < 0) throw InputError("node \"" + spec.name + "\": gpu_count must be >= 0");
  const auto id = static_cast<NodeId>(nodes_.size());
  node_by_name_.emplace(spec.name, id);
  nodes_.push_back(std::move(spec));
  node_up_.push_back(1);
  boost::add_vertex(graph_);
  invalidate_routes();
  return id;
}

NodeId Topology::add_switch(std::string name) {
  ClusterNode s;
  s.name = std::move(name);
  s.kind = NodeKind::kSwitch;
  return add_node(std::move(s));
}

LinkId Topology::add_link(ClusterLink spec) {
  const auto id = static_cast<LinkId>(links_.size());
  if (spec.name.empty()) spec.name = "L" + std::to_string(id);
  const std::string what = "link \"" + spec.name + "\"";
  if (link_by_name_.count(spec.name)) throw InputError(what + ": duplicate id");
  if (spec.a >= nodes_.size() || spec.b >= nodes_.size()) throw InputError(what + ": unknown node");
  if (spec.a == spec.b) {
    throw InputError(what + ": both ends are node \"" + nodes_[spec.a].name + "\"");
  }
  if (!(spec.bandwidth.value > 0) || !std::isfinite(spec.bandwidth.value)) {
    throw InputError(what + ": bandwidth must be > 0 (got " + std::to_string(spec.bandwidth.value) +
                     " bit/s)");
  }
  if (spec.latency.ns < 0) {
    throw InputError(what + ": latency must be >= 0 (got " + std::to_string(spec.latency.ns) +
                     " ns)");
  }
  link_by_name_.emplace(spec.name, id);
  boost::add_edge(spec.a, spec.b, id, graph_);
  state_.push_back({spec.bandwidth, spec.latency, true});
  links_.push_back(std::move(spec));
  invalidate_routes();
  return id;
}

LinkId Topology::add_link(std::string name, std::string_view a, std::string_view b,
                          BitsPerSecond bandwidth, SimTime latency, Duplex duplex) {
  const std::string field = "link \"" + name + "\"";
  ClusterLink s{
      std::move(name), node_id(a, field + " src"), node_id(b, field + " dst"), bandwidth, latency,
      duplex};
  return add_link(std::move(s));
}

std::optional<NodeId> Topology::find_node(std::string_view name) const {
  const auto it = node_by_name_.find(std::string(name));
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<LinkId> Topology::find_link(std::string_view name) const {
  const auto it = link_by_name_.find(std::string(name));
  if (it == link_by_name_.end()) return std::nullopt;
  return it->second;
}

NodeId Topology::node_id(std::string_view name, std::string_view field) const {
  if (auto n = find_node(name)) return *n;
  throw InputError(std::string(field) + ": unknown node \"" + std::string(name) + "\"");
}

std::vector<NodeId> Topology::nodes_of_kind(NodeKind k) const {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == k) out.push_back(i);
  }
  return out;
}

bool Topology::link_usable(LinkId l) const {
  const ClusterLink& s = links_[l];
  return state_[l].up && node_up_[s.a] && node_up_[s.b];
}

void Topology::set_link_bandwidth(LinkId l, BitsPerSecond bw) {
  if (!(bw.value > 0) || !std::isfinite(bw.value)) {
    throw InputError("link \"" + links_.at(l).name + "\": bandwidth must be > 0");
  }
  state_.at(l).bandwidth = bw;
}

void Topology::set_link_latency(LinkId l, SimTime latency) {
  if (latency.ns < 0) {
    throw InputError("link \"" + links_.at(l).name + "\": latency must be >= 0");
  }
  if (state_.at(l).latency == latency) return;
  state_[l].latency = latency;
  invalidate_routes();
}

void Topology::set_link_up(LinkId l, bool up) {
  if (state_.at(l).up == up) return;
  state_[l].up = up;
  invalidate_routes();
}

void Topology::set_node_up(NodeId n, bool up) {
  if (static_cast<bool>(node_up_.at(n)) == up) return;
  node_up_[n] = up ? 1 : 0;
  if (boost::out_degree(n, graph_) > 1) {
    invalidate_routes();
    return;
  }
  // A node on one link (a host) is on no other node's shortest path, so only the routes
  // to and from it change: patch each cached tree instead of recomputing all of them
  // (a fleet of 10,000 hosts would redo 10,000 Dijkstras per failure and repair).
  ++routing_version_;
  if (trees_.erase(n) > 0) std::erase(tree_order_, n);
  std::optional<std::pair<LinkId, NodeId>> uplink;
  for (auto [e, end] = boost::out_edges(n, graph_); e != end; ++e) {
    uplink.emplace(boost::get(boost::edge_index, graph_, *e),
                   static_cast<NodeId>(boost::target(*e, graph_)));
  }
  for (auto& [src, t] : trees_) {
    t.latency[n] = -1;
    t.hops[n] = 0;
    if (uplink && link_usable(uplink->first) && t.latency[uplink->second] >= 0) {
      t.latency[n] = t.latency[uplink->second] + state_[uplink->first].latency.ns;
      t.hops[n] = t.hops[uplink->second] + 1;
    }
  }
  std::erase_if(routes_, [n](const auto& entry) {
    return static_cast<NodeId>(entry.first >> 32) == n ||
           static_cast<NodeId>(entry.first & 0xffffffffu) == n;
  });
}

void Topology::invalidate_routes() {
  ++routing_version_;
  trees_.clear();
  tree_order_.clear();
  routes_.clear();
}

const Topology::SourceTree& Topology::tree(NodeId src) const {
  if (auto it = trees_.find(src); it != trees_.end()) return it->second;
  SourceTree t = is_host(src) ? host_tree(src) : dijkstra_tree(src);
  // Trees are only needed to route a pair not seen yet (routes_ keeps those), so a bounded
  // cache serves a fleet: 10,000 sources' trees over 10,000 nodes would be 1.2 GB.
  if (trees_.size() >= kMaxTrees) {
    trees_.erase(tree_order_.front());
    tree_order_.pop_front();
  }
  tree_order_.push_back(src);
  return trees_.emplace(src, std::move(t)).first->second;
}

bool Topology::is_host(NodeId n) const {
  if (boost::out_degree(n, graph_) != 1) return false;
  const auto e = *boost::out_edges(n, graph_).first;
  return boost::out_degree(boost::target(e, graph_), graph_) > 1;  // not a pair of hosts
}

Topology::SourceTree Topology::host_tree(NodeId src) const {
  // Every path from a node on one link starts with that link, and none passes through it:
  // its tree is its neighbour's, one link further, and itself at 0. This is what Dijkstra
  // gives, at the cost of a copy (a fleet routes from 10,000 hosts, a few hundred switches).
  const auto e = *boost::out_edges(src, graph_).first;
  const LinkId l = boost::get(boost::edge_index, graph_, e);
  const auto via = static_cast<NodeId>(boost::target(e, graph_));
  SourceTree t;
  if (link_usable(l)) {
    t = tree(via);  // a copy: inserting src's tree may evict via's
    for (std::size_t v = 0; v < t.latency.size(); ++v) {
      if (t.latency[v] < 0) continue;
      t.latency[v] += state_[l].latency.ns;
      t.hops[v] += 1;
    }
  } else {
    t.latency.assign(nodes_.size(), -1);
    t.hops.assign(nodes_.size(), 0);
  }
  t.latency[src] = 0;
  t.hops[src] = 0;
  return t;
}

Topology::SourceTree Topology::dijkstra_tree(NodeId src) const {
  struct Usable {
    const Topology* t = nullptr;
    bool operator()(Graph::edge_descriptor e) const {
      return t->link_usable(boost::get(boost::edge_index, t->graph_, e));
    }
  };
  const boost::filtered_graph<Graph, Usable> g(graph_, Usable{this});
  const std::size_t n = nodes_.size();
  std::vector<Dist> dist(n, kInfinite);
  std::vector<Graph::vertex_descriptor> pred(n);
  auto weight = boost::make_function_property_map<Graph::edge_descriptor, Dist>(
      [this](Graph::edge_descriptor e) {
        return Dist{state_[boost::get(boost::edge_index, graph_, e)].latency.ns, 1};
      });
  boost::dijkstra_shortest_paths(g, src,
                                 boost::weight_map(weight)
                                     .distance_map(boost::make_iterator_property_map(
                                         dist.begin(), boost::get(boost::vertex_index, g)))
                                     .predecessor_map(boost::make_iterator_property_map(
                                         pred.begin(), boost::get(boost::vertex_index, g)))
                                     .distance_compare(DistLess{})
                                     .distance_combine(DistPlus{})
                                     .distance_inf(kInfinite)
                                     .distance_zero(Dist{}));
  SourceTree t;
  t.latency.resize(n);
  t.hops.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    const bool reached = dist[v].latency != kInfinite.latency;
    t.latency[v] = reached ? dist[v].latency : -1;
    t.hops[v] = reached ? dist[v].hops : 0;
  }
  return t;
}

const Route* Topology::route(NodeId src, NodeId dst) const {
  if (src >= nodes_.size()) return cached_route(src, dst);  // throws std::out_of_range
  if (last_route_.size() < nodes_.size()) last_route_.resize(nodes_.size());
  LastRoute& last = last_route_[src];
  if (last.version == routing_version_ && last.dst == dst) return last.route;
  const Route* r = cached_route(src, dst);
  last = {routing_version_, dst, r};
  return r;
}

const Route* Topology::cached_route(NodeId src, NodeId dst) const {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | dst;
  if (auto it = routes_.find(key); it != routes_.end()) return it->second ? &*it->second : nullptr;
  std::optional<Route> result;
  if (node_up_.at(src) && node_up_.at(dst)) {
    const SourceTree& t = tree(src);
    if (t.latency[dst] >= 0) {
      Route r{src, dst, {}, SimTime{t.latency[dst]}};
      // Walk back from dst: among the links that keep the path shortest, the smallest id.
      for (NodeId v = dst; v != src;) {
        LinkId best = std::numeric_limits<LinkId>::max();
        NodeId best_u = v;
        for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
          const LinkId l = boost::get(boost::edge_index, graph_, *e);
          if (l >= best || !link_usable(l)) continue;
          const auto u = static_cast<NodeId>(boost::target(*e, graph_));
          if (t.latency[u] < 0) continue;
          if (t.latency[u] + state_[l].latency.ns == t.latency[v] && t.hops[u] + 1 == t.hops[v]) {
            best = l;
            best_u = u;
          }
        }
        r.hops.push_back({best, links_[best].a == best_u});
        v = best_u;
      }
      std::reverse(r.hops.begin(), r.hops.end());
      result = std::move(r);
    }
  }
  auto& slot = routes_.emplace(key, std::move(result)).first->second;
  return slot ? &*slot : nullptr;
}

std::optional<Route> Topology::ecmp_route(NodeId src, NodeId dst, std::uint64_t flow_hash) const {
  const Route* base = route(src, dst);
  if (!base || src == dst) return base ? std::optional<Route>(*base) : std::nullopt;
  const SourceTree& t = tree(src);
  Route r{src, dst, {}, base->latency};
  std::vector<std::pair<LinkId, NodeId>> next;  // equal-cost links into v, by id
  for (NodeId v = dst; v != src;) {
    next.clear();
    for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
      const LinkId l = boost::get(boost::edge_index, graph_, *e);
      if (!link_usable(l)) continue;
      const auto u = static_cast<NodeId>(boost::target(*e, graph_));
      if (t.latency[u] < 0) continue;
      if (t.latency[u] + state_[l].latency.ns == t.latency[v] && t.hops[u] + 1 == t.hops[v]) {
        next.emplace_back(l, u);
      }
    }
    std::sort(next.begin(), next.end());
    const auto& [l, u] = next[splitmix64(flow_hash ^ splitmix64(v)) % next.size()];
    r.hops.push_back({l, links_[l].a == u});
    v = u;
  }
  std::reverse(r.hops.begin(), r.hops.end());
  return r;
}

Route Topology::make_route(NodeId src, NodeId dst, const std::vector<LinkId>& links) const {
  Route r{src, dst, {}, SimTime{0}};
  NodeId at = src;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const ClusterLink& l = links_.at(links[i]);
    if (l.a == at) {
      r.hops.push_back({links[i], true});
      at = l.b;
    } else if (l.b == at) {
      r.hops.push_back({links[i], false});
      at = l.a;
    } else {
      throw InputError("route: link \"" + l.name + "\" (hop " + std::to_string(i) +
                       ") does not touch node \"" + nodes_[at].name + "\"");
    }
    r.latency += state_[links[i]].latency;
  }
  if (at != dst) {
    throw InputError("route: ends at node \"" + nodes_[at].name + "\", not at the destination \"" +
                     nodes_[dst].name + "\"");
  }
  return r;
}

BitsPerSecond Topology::bottleneck(const Route& r) const {
  double b = std::numeric_limits<double>::infinity();
  for (const Hop& h : r.hops) b = std::min(b, state_[h.link].bandwidth.value);
  return {b};
}

bool Topology::usable(const Route& r) const {
  if (!node_up_[r.src] || !node_up_[r.dst]) return false;
  return std::all_of(r.hops.begin(), r.hops.end(),
                     [this](const Hop& h) { return link_usable(h.link); });
}

}  // namespace kvshift::sim
