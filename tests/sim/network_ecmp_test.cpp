// ECMP: with NetworkOptions::ecmp a routed transfer takes one of the
// equal-cost shortest paths, picked by a seeded hash of its id. Off by default
// (the lowest-id path, as SimGrid is fed); on, it spreads a leaf's flows over
// every spine, a rerun with the same seed takes the same paths, and the max-min
// sharing on those paths is the same as with them given explicitly.
#include <gtest/gtest.h>

#include <set>

#include "sim/generators.hpp"
#include "tests/sim/network_fixtures.hpp"

namespace kvshift::sim::testing {
namespace {

constexpr int kSpines = 4;
constexpr int kFlows = 64;

Topology leaf_spine() {
  Cluster cluster;
  LeafSpineParams p;
  p.leaves = 2;
  p.spines = kSpines;
  p.nodes_per_leaf = 8;
  p.host = LinkParams{BitsPerSecond{100e9}, microseconds(1)};
  add_leaf_spine(cluster, p);
  return Topology(cluster);
}

/// The spine a route crosses ("spineJ" -> J), -1 if none.
int spine_of(const Topology& t, const Route& r) {
  for (const Hop& h : r.hops) {
    for (const NodeId n : {t.link(h.link).a, t.link(h.link).b}) {
      const std::string& name = t.node(n).name;
      if (name.rfind("spine", 0) == 0) return std::stoi(name.substr(5));
    }
  }
  return -1;
}

struct Outcome {
  std::vector<std::vector<Hop>> routes;
  std::vector<SimTime> finish;
};

/// kFlows transfers from leaf 0's nodes to leaf 1's, all at t = 0, of mixed sizes.
Outcome run(const NetworkOptions& o, const std::vector<std::vector<LinkId>>& explicit_routes = {}) {
  Topology t = leaf_spine();
  Simulator sim;
  Network net(sim, t, o);
  for (int k = 0; k < kFlows; ++k) {
    TransferRequest r =
        req(*t.find_node("gpu" + std::to_string(k % 8)),
            *t.find_node("gpu" + std::to_string(8 + (3 * k) % 8)), 1'000'000 + 37'000 * k);
    if (!explicit_routes.empty()) r.route = explicit_routes[k];
    net.submit(std::move(r));
  }
  sim.run_until(SimTime{1});
  Outcome out;
  for (TransferId id = 0; id < kFlows; ++id) out.routes.push_back(net.route_of(id)->hops);
  sim.run();
  for (TransferId id = 0; id < kFlows; ++id) {
    EXPECT_EQ(net.info(id).state, TransferState::kFinished);
    out.finish.push_back(net.info(id).finish);
  }
  return out;
}

NetworkOptions ecmp(std::uint64_t seed) {
  NetworkOptions o;
  o.ecmp = true;
  o.ecmp_seed = seed;
  return o;
}

TEST(Ecmp, SpreadsALeafsFlowsOverEverySpineOnEqualCostPaths) {
  const Topology t = leaf_spine();
  const Outcome r = run(ecmp(7));
  std::vector<int> per_spine(kSpines, 0);
  for (int k = 0; k < kFlows; ++k) {
    const Route route{*t.find_node("gpu" + std::to_string(k % 8)),
                      *t.find_node("gpu" + std::to_string(8 + (3 * k) % 8)),
                      r.routes[k],
                      {}};
    const int s = spine_of(t, route);
    ASSERT_GE(s, 0) << "flow " << k << " must cross a spine";
    ++per_spine[s];
    EXPECT_EQ(r.routes[k].size(), t.route(route.src, route.dst)->hops.size()) << "equal cost";
  }
  for (int s = 0; s < kSpines; ++s) {
    EXPECT_GE(per_spine[s], kFlows / kSpines / 3) << "spine" << s << " carries too few flows";
  }
}

TEST(Ecmp, OffByDefaultEveryFlowTakesTheLowestIdPath) {
  const Topology t = leaf_spine();
  EXPECT_FALSE(NetworkOptions{}.ecmp);
  const Outcome r = run(NetworkOptions{});
  for (int k = 0; k < kFlows; ++k) {
    const NodeId src = *t.find_node("gpu" + std::to_string(k % 8));
    const NodeId dst = *t.find_node("gpu" + std::to_string(8 + (3 * k) % 8));
    EXPECT_EQ(r.routes[k], t.route(src, dst)->hops) << "flow " << k;
  }
}

TEST(Ecmp, PathPerFlowIsStableAcrossRerunsAndMovesWithTheSeed) {
  const Outcome a = run(ecmp(7)), b = run(ecmp(7)), c = run(ecmp(8));
  EXPECT_EQ(a.routes, b.routes);
  EXPECT_EQ(a.finish, b.finish);
  int moved = 0;
  for (int k = 0; k < kFlows; ++k) moved += a.routes[k] != c.routes[k];
  EXPECT_GT(moved, kFlows / 4) << "another seed picks other paths";
}

TEST(Ecmp, SharingOnHashedPathsEqualsTheSamePathsGivenExplicitly) {
  const Outcome hashed = run(ecmp(7));
  std::vector<std::vector<LinkId>> links;
  for (const auto& hops : hashed.routes) {
    links.emplace_back();
    for (const Hop& h : hops) links.back().push_back(h.link);
  }
  const Outcome given = run(NetworkOptions{}, links);
  EXPECT_EQ(given.routes, hashed.routes);
  EXPECT_EQ(given.finish, hashed.finish);
  // Spreading over 4 spines beats the single path: the last transfer ends sooner.
  const Outcome single = run(NetworkOptions{});
  EXPECT_LT(*std::max_element(hashed.finish.begin(), hashed.finish.end()),
            *std::max_element(single.finish.begin(), single.finish.end()));
}

TEST(Ecmp, TopologyHashCoversEverySpineAndAvoidsADownLink) {
  Topology t = leaf_spine();
  const NodeId src = *t.find_node("gpu0"), dst = *t.find_node("gpu9");
  std::set<int> spines;
  for (std::uint64_t h = 0; h < 64; ++h) {
    const auto r = t.ecmp_route(src, dst, h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->latency, t.route(src, dst)->latency);
    EXPECT_EQ(t.ecmp_route(src, dst, h)->hops, r->hops) << "deterministic";
    spines.insert(spine_of(t, *r));
  }
  EXPECT_EQ(spines.size(), static_cast<std::size_t>(kSpines));
  t.set_link_up(*t.find_link("leaf1-spine2"), false);
  for (std::uint64_t h = 0; h < 64; ++h) EXPECT_NE(spine_of(t, *t.ecmp_route(src, dst, h)), 2);
  EXPECT_EQ(t.ecmp_route(src, src, 5)->hops.size(), 0u);
}

TEST(Ecmp, AFlowWhoseSpineFailsIsReroutedToAnotherEqualCostPath) {
  Topology t = leaf_spine();
  Simulator sim;
  Network net(sim, t, ecmp(3));
  const TransferId id = net.submit(req(*t.find_node("gpu0"), *t.find_node("gpu9"), 1'000'000'000));
  sim.run_until(microseconds(10));
  const int before = spine_of(t, *net.route_of(id));
  net.fail_link(*t.find_link("leaf0-spine" + std::to_string(before)));
  ASSERT_TRUE(net.route_of(id)) << net.info(id).reason;
  EXPECT_NE(spine_of(t, *net.route_of(id)), before);
  EXPECT_EQ(net.info(id).reroutes, 1);
  sim.run();
  EXPECT_EQ(net.info(id).state, TransferState::kFinished);
}

}  // namespace
}  // namespace kvshift::sim::testing
