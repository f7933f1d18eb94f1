// A host (a node on one link) failing or coming back patches the cached routing
// trees instead of dropping them; the routes must be exactly those a topology
// with no cache computes from scratch.
#include <gtest/gtest.h>

#include <random>

#include "sim/generators.hpp"
#include "sim/topology.hpp"

namespace kvshift::sim {
namespace {

LeafSpineParams fabric() {
  LeafSpineParams p;
  p.leaves = 4;
  p.spines = 3;
  p.nodes_per_leaf = 5;
  p.host.latency = SimTime{1'500};
  p.uplink_latency = SimTime{700};
  return p;
}

TEST(TopologyPatch, HostFailuresAndRepairsGiveTheRoutesOfAFreshTopology) {
  Cluster cluster;
  const GeneratedNodes g = add_leaf_spine(cluster, fabric());
  Topology cached(cluster);
  std::mt19937_64 rng(5);
  const auto n = static_cast<NodeId>(cached.node_count());
  for (int step = 0; step < 300; ++step) {
    // Mostly hosts (patched), sometimes a leaf or spine (everything recomputed).
    const bool host = rng() % 5 != 0;
    const NodeId v = host ? g.gpus[rng() % g.gpus.size()] : g.switches[rng() % g.switches.size()];
    cached.set_node_up(v, !cached.node_up(v));
    Topology fresh(cluster);
    for (NodeId u = 0; u < n; ++u) fresh.set_node_up(u, cached.node_up(u));
    for (int q = 0; q < 40; ++q) {
      const NodeId s = g.gpus[rng() % g.gpus.size()], d = g.gpus[rng() % g.gpus.size()];
      if (s == d) continue;
      const Route* a = cached.route(s, d);
      const Route* b = fresh.route(s, d);
      ASSERT_EQ(a == nullptr, b == nullptr) << "step " << step << ": " << s << " -> " << d;
      if (!a) continue;
      ASSERT_EQ(a->hops, b->hops) << "step " << step << ": " << s << " -> " << d;
      ASSERT_EQ(a->latency, b->latency);
    }
  }
}

// More sources than the tree cache holds: evicted trees are recomputed, routes unchanged.
TEST(TopologyPatch, ManySourcesRouteAsAFreshTopology) {
  LeafSpineParams p = fabric();
  p.nodes_per_leaf = 90;  // 360 hosts
  Cluster cluster;
  const GeneratedNodes g = add_leaf_spine(cluster, p);
  Topology cached(cluster);
  std::mt19937_64 rng(9);
  const std::size_t hosts = g.gpus.size();
  for (int round = 0; round < 3; ++round) {
    const NodeId down = g.gpus[rng() % hosts];
    cached.set_node_up(down, false);
    Topology fresh(cluster);
    fresh.set_node_up(down, false);
    for (std::size_t i = 0; i < hosts; ++i) {
      for (const std::size_t step : {std::size_t{1}, std::size_t{97}}) {
        const NodeId s = g.gpus[i], d = g.gpus[(i + step + round) % hosts];
        const Route* a = cached.route(s, d);
        const Route* b = fresh.route(s, d);
        ASSERT_EQ(a == nullptr, b == nullptr) << s << " -> " << d;
        if (a) {
          ASSERT_EQ(a->hops, b->hops) << s << " -> " << d;
        }
      }
    }
    cached.set_node_up(down, true);
  }
}

}  // namespace
}  // namespace kvshift::sim
