// Topology: validation, deterministic routing, route caching, generators.
#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "sim/generators.hpp"
#include "sim/topology.hpp"

namespace kvshift::sim {
namespace {

ClusterNode gpu(std::string name) {
  ClusterNode n;
  n.name = std::move(name);
  n.kind = NodeKind::kGpu;
  n.gpu_count = 8;
  return n;
}

std::vector<std::string> link_names(const Topology& t, const Route& r) {
  std::vector<std::string> out;
  for (const Hop& h : r.hops) out.push_back(t.link(h.link).name);
  return out;
}

TEST(Topology, RejectsBadLinks) {
  Topology t;
  t.add_node(gpu("A"));
  t.add_node(gpu("B"));
  EXPECT_THROW(t.add_link("x", "A", "Z", BitsPerSecond{1e9}, SimTime{0}), InputError);
  EXPECT_THROW(t.add_link("x", "A", "B", BitsPerSecond{0}, SimTime{0}), InputError);
  EXPECT_THROW(t.add_link("x", "A", "B", BitsPerSecond{-5}, SimTime{0}), InputError);
  EXPECT_THROW(t.add_link("x", "A", "B", BitsPerSecond{1e9}, SimTime{-1}), InputError);
  EXPECT_THROW(t.add_link("x", "A", "A", BitsPerSecond{1e9}, SimTime{0}), InputError);
  EXPECT_THROW(t.add_node(gpu("A")), InputError);
  t.add_link("x", "A", "B", BitsPerSecond{1e9}, SimTime{0});
  EXPECT_THROW(t.add_link("x", "A", "B", BitsPerSecond{1e9}, SimTime{0}), InputError);
  try {
    t.add_link("y", "A", "Q", BitsPerSecond{1e9}, SimTime{0});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"Q\""), std::string::npos) << e.what();
  }
}

TEST(Routing, ShortestByLatencyThenHopsThenLinkId) {
  Topology t;
  for (const char* n : {"A", "B", "C", "D"}) t.add_node(gpu(n));
  const BitsPerSecond bw{1e9};
  // A-B-D: 2 hops, 2 us; A-C-D: 2 hops, 2 us; A-D direct: 1 hop, 3 us.
  t.add_link("ab", "A", "B", bw, microseconds(1));
  t.add_link("bd", "B", "D", bw, microseconds(1));
  t.add_link("ac", "A", "C", bw, microseconds(1));
  t.add_link("cd", "C", "D", bw, microseconds(1));
  t.add_link("ad", "A", "D", bw, microseconds(3));
  const Route* r = t.route(0, 3);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(link_names(t, *r), (std::vector<std::string>{"ab", "bd"}))
      << "lowest link ids win ties";
  EXPECT_EQ(r->latency, microseconds(2));
  // Make the direct link as fast: equal latency, fewer hops wins.
  Topology u;
  for (const char* n : {"A", "B", "D"}) u.add_node(gpu(n));
  u.add_link("ab", "A", "B", bw, microseconds(1));
  u.add_link("bd", "B", "D", bw, microseconds(1));
  u.add_link("ad", "A", "D", bw, microseconds(2));
  EXPECT_EQ(link_names(u, *u.route(0, 2)), (std::vector<std::string>{"ad"}));
  const Route* back = u.route(2, 0);
  ASSERT_NE(back, nullptr);
  EXPECT_FALSE(back->hops[0].forward) << "ad is crossed from D to A";
}

TEST(Routing, RoutesAreCachedUntilTheTopologyChanges) {
  Topology t;
  for (const char* n : {"A", "B", "C"}) t.add_node(gpu(n));
  const LinkId ab = t.add_link("ab", "A", "B", BitsPerSecond{1e9}, microseconds(1));
  t.add_link("bc", "B", "C", BitsPerSecond{1e9}, microseconds(1));
  const LinkId ac = t.add_link("ac", "A", "C", BitsPerSecond{1e9}, microseconds(5));
  const Route* r1 = t.route(0, 2);
  EXPECT_EQ(t.route(0, 2), r1) << "same cached object";
  const auto v = t.routing_version();
  t.set_link_bandwidth(ab, BitsPerSecond{1e6});
  EXPECT_EQ(t.routing_version(), v) << "bandwidth does not move latency routes";
  t.set_link_latency(ab, microseconds(4));  // a-b-c now 5 us: a tie, broken by hop count
  EXPECT_GT(t.routing_version(), v);
  EXPECT_EQ(link_names(t, *t.route(0, 2)), (std::vector<std::string>{"ac"}));
  EXPECT_THROW(t.set_link_latency(ab, SimTime{-1}), InputError);
  t.set_link_latency(ab, microseconds(1));
  EXPECT_EQ(link_names(t, *t.route(0, 2)), (std::vector<std::string>{"ab", "bc"}));
  t.set_link_up(ab, false);
  EXPECT_GT(t.routing_version(), v);
  EXPECT_EQ(link_names(t, *t.route(0, 2)), (std::vector<std::string>{"ac"}));
  t.set_link_up(ac, false);
  EXPECT_EQ(t.route(0, 2), nullptr) << "disconnected";
  t.set_link_up(ab, true);
  EXPECT_EQ(link_names(t, *t.route(0, 2)), (std::vector<std::string>{"ab", "bc"}));
  t.set_node_up(1, false);
  EXPECT_EQ(t.route(0, 2), nullptr) << "through a failed node";
  EXPECT_EQ(t.route(1, 1), nullptr) << "a failed end has no route";
}

TEST(Routing, ExplicitRoutesMustBeWalksFromSourceToDestination) {
  Topology t;
  for (const char* n : {"A", "B", "C"}) t.add_node(gpu(n));
  const LinkId ab = t.add_link("ab", "A", "B", BitsPerSecond{1e9}, microseconds(1));
  const LinkId bc = t.add_link("bc", "B", "C", BitsPerSecond{2e9}, microseconds(2));
  const Route r = t.make_route(0, 2, {ab, bc});
  EXPECT_EQ(r.latency, microseconds(3));
  EXPECT_EQ(t.bottleneck(r).value, 1e9);
  EXPECT_THROW(t.make_route(0, 2, {bc}), InputError);
  EXPECT_THROW(t.make_route(0, 2, {ab}), InputError);
  EXPECT_EQ(t.make_route(2, 0, {bc, ab}).hops[0], (Hop{bc, false}));
}

TEST(Generators, LeafSpineHasTheRightShapeAndOversubscription) {
  Cluster c;
  LeafSpineParams p;
  p.leaves = 4;
  p.spines = 2;
  p.nodes_per_leaf = 8;
  p.host.bandwidth = BitsPerSecond{100e9};
  p.oversubscription = 2;
  const GeneratedNodes g = add_leaf_spine(c, p);
  const Topology t(c);
  EXPECT_EQ(g.gpus.size(), 32u);
  EXPECT_EQ(t.node_count(), 32u + 4 + 2);
  EXPECT_EQ(t.link_count(), 32u + 4 * 2);
  const LinkId up = *t.find_link("leaf0-spine1");
  EXPECT_DOUBLE_EQ(t.link(up).bandwidth.value, 8 * 100e9 / (2 * 2));
  // Same leaf: 2 hops; different leaves: node-leaf-spine-leaf-node.
  EXPECT_EQ(t.route(*t.find_node("gpu0"), *t.find_node("gpu7"))->hops.size(), 2u);
  const Route* far = t.route(*t.find_node("gpu0"), *t.find_node("gpu31"));
  ASSERT_NE(far, nullptr);
  EXPECT_EQ(far->hops.size(), 4u);
  EXPECT_EQ(t.link(far->hops[1].link).name, "leaf0-spine0");
}

TEST(Generators, StarRingAndMultiSite) {
  Cluster sc;
  add_star(sc, 5, LinkParams{});
  const Topology star(sc);
  EXPECT_EQ(star.route(*star.find_node("gpu0"), *star.find_node("gpu4"))->hops.size(), 2u);
  Cluster rc;
  add_ring(rc, 6, LinkParams{});
  const Topology ring(rc);
  EXPECT_EQ(ring.route(*ring.find_node("gpu0"), *ring.find_node("gpu3"))->hops.size(), 3u);
  EXPECT_EQ(ring.route(*ring.find_node("gpu0"), *ring.find_node("gpu5"))->hops.size(), 1u);
  EXPECT_THROW(add_ring(rc, 2, LinkParams{}, {}, "x"), InputError);
  Cluster wc;
  MultiSiteParams w;
  for (const char* site : {"east", "west", "north"})
    w.sites.push_back({site, 4, LinkParams{BitsPerSecond{100e9}, microseconds(2)}});
  w.wan = LinkParams{BitsPerSecond{10e9}, milliseconds(20)};
  const GeneratedNodes g = add_multi_site(wc, w);
  const Topology wan(wc);
  EXPECT_EQ(g.gpus.size(), 3u * 4);
  EXPECT_EQ(g.switches.size(), 3u);
  EXPECT_EQ(wan.link_count(), 3u * 4 + 3);  // LANs, then the WAN mesh
  EXPECT_EQ(wan.node(*wan.find_node("west/gpu3")).site, "west");
  EXPECT_EQ(wan.node(*wan.find_node("west/gw")).site, "west");
  const Route* r = wan.route(*wan.find_node("east/gpu0"), *wan.find_node("north/gpu3"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->hops.size(), 3u) << "node-gw ~ gw-node";
  EXPECT_EQ(r->latency, milliseconds(20) + microseconds(4));
  w.sites[2].name = "east";
  EXPECT_THROW(add_multi_site(wc, w), InputError) << "two sites named east";
  w.sites.resize(1);
  EXPECT_THROW(add_multi_site(wc, w), InputError) << "one site";
}

}  // namespace
}  // namespace kvshift::sim
