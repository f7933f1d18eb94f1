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
  Topology cached;
  const GeneratedNodes g = add_leaf_spine(cached, fabric());
  std::mt19937_64 rng(5);
  const auto n = static_cast<NodeId>(cached.node_count());
  for (int step = 0; step < 300; ++step) {
    // Mostly hosts (patched), sometimes a leaf or spine (everything recomputed).
    const bool host = rng() % 5 != 0;
    const NodeId v = host ? g.gpus[rng() % g.gpus.size()] : g.switches[rng() % g.switches.size()];
    cached.set_node_up(v, !cached.node_up(v));
    Topology fresh;
    add_leaf_spine(fresh, fabric());
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

}  // namespace
}  // namespace kvshift::sim
