// Routing against a brute-force reference on random graphs: shortest (latency, hops) over
// usable links by Floyd–Warshall, then the walk back from the destination that takes the
// smallest-id link keeping the path shortest. The graphs mix switches with hosts (nodes on
// one link, whose trees come from their neighbour's), zero-latency links (ties), parallel
// links, pairs of hosts on one link, and links and nodes that are down.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sim/topology.hpp"

namespace kvshift::sim {
namespace {

using Dist = std::pair<std::int64_t, std::int64_t>;  // latency, hops
constexpr Dist kNone{std::numeric_limits<std::int64_t>::max(), 0};

std::optional<std::vector<Hop>> reference_route(const Topology& t, NodeId src, NodeId dst) {
  const std::size_t n = t.node_count();
  auto usable = [&](LinkId l) {
    const ClusterLink& k = t.link(l);
    return t.link_up(l) && t.node_up(k.a) && t.node_up(k.b);
  };
  std::vector<std::vector<Dist>> d(n, std::vector<Dist>(n, kNone));
  for (NodeId v = 0; v < n; ++v) d[v][v] = {0, 0};
  for (LinkId l = 0; l < t.link_count(); ++l) {
    if (!usable(l)) continue;
    const ClusterLink& k = t.link(l);
    const Dist w{k.latency.ns, 1};
    d[k.a][k.b] = std::min(d[k.a][k.b], w);
    d[k.b][k.a] = std::min(d[k.b][k.a], w);
  }
  for (std::size_t m = 0; m < n; ++m)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        if (d[i][m] == kNone || d[m][j] == kNone) continue;
        d[i][j] =
            std::min(d[i][j], {d[i][m].first + d[m][j].first, d[i][m].second + d[m][j].second});
      }
  if (!t.node_up(src) || !t.node_up(dst) || d[src][dst] == kNone) return std::nullopt;
  std::vector<Hop> hops;
  for (NodeId v = dst; v != src;) {
    std::optional<std::pair<LinkId, NodeId>> best;
    for (LinkId l = 0; l < t.link_count() && !best; ++l) {  // ascending id: the first fits
      const ClusterLink& k = t.link(l);
      if (!usable(l) || (k.a != v && k.b != v)) continue;
      const NodeId u = k.a == v ? k.b : k.a;
      if (d[src][u] == kNone) continue;
      if (d[src][u].first + k.latency.ns == d[src][v].first &&
          d[src][u].second + 1 == d[src][v].second)
        best.emplace(l, u);
    }
    hops.push_back({best->first, t.link(best->first).a == best->second});
    v = best->second;
  }
  std::reverse(hops.begin(), hops.end());
  return hops;
}

TEST(RoutingReference, RandomGraphsWithHostsRouteAsTheBruteForceReference) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 60; ++round) {
    Topology t;
    const int switches = 2 + static_cast<int>(rng() % 6), hosts = static_cast<int>(rng() % 12);
    for (int i = 0; i < switches + hosts + 2; ++i) {
      ClusterNode node;
      node.name = "n" + std::to_string(i);
      node.kind = i < switches ? NodeKind::kSwitch : NodeKind::kGpu;
      t.add_node(node);
    }
    auto latency = [&] { return SimTime{static_cast<std::int64_t>(rng() % 4) * 500}; };  // ties
    auto link = [&](NodeId a, NodeId b) {
      t.add_link({"", a, b, BitsPerSecond{1e9}, latency(), Duplex::kFull});
    };
    for (int i = 1; i < switches; ++i) link(i, static_cast<NodeId>(rng() % i));  // connected
    for (int e = static_cast<int>(rng() % (2 * switches)); e > 0; --e) {
      const auto a = static_cast<NodeId>(rng() % switches),
                 b = static_cast<NodeId>(rng() % switches);
      if (a != b) link(a, b);  // extra and parallel links
    }
    for (int h = 0; h < hosts; ++h) link(switches + h, static_cast<NodeId>(rng() % switches));
    link(switches + hosts, switches + hosts + 1);  // two hosts on one link, alone
    const auto n = static_cast<NodeId>(t.node_count());
    for (int change = 0; change < 8; ++change) {
      for (NodeId s = 0; s < n; ++s) {
        for (NodeId d = 0; d < n; ++d) {
          const Route* got = t.route(s, d);
          const std::optional<std::vector<Hop>> want = reference_route(t, s, d);
          ASSERT_EQ(got != nullptr, want.has_value())
              << "round " << round << ": " << s << " -> " << d;
          if (got) {
            ASSERT_EQ(got->hops, *want) << "round " << round << ": " << s << " -> " << d;
          }
        }
      }
      if (rng() % 2) {
        const auto l = static_cast<LinkId>(rng() % t.link_count());
        t.set_link_up(l, !t.link_up(l));
      } else {
        const auto v = static_cast<NodeId>(rng() % n);
        t.set_node_up(v, !t.node_up(v));
      }
    }
  }
}

}  // namespace
}  // namespace kvshift::sim
