// Differential test: kvshift's network model against SimGrid's (plain max-min,
// correction factors 1; see simgrid_runner.hpp) on random topologies and flow
// sets (staggered starts, shared links, multi-hop routes, half and full duplex,
// per-flow caps), hand-computed cases, and small instances of the four workload
// classes of the network benchmarks (bench/sim_network_workloads.hpp: leaf-spine
// drain waves, fat-tree all-to-core Poisson, incast bursts, multi-site WAN with
// long-lived flows). Completion times must agree within 1e-6 relative. The case
// count and the worst difference are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

#include "bench/sim_network_workloads.hpp"
#include "tests/sim/simgrid/simgrid_runner.hpp"

namespace kvshift::sim::testing {
namespace {

constexpr int kRandomCases = 120;

NetCase random_case(std::mt19937_64& rng, int index) {
  NetCase c;
  c.name = "random" + std::to_string(index);
  c.nodes = 3 + static_cast<int>(rng() % 8);
  auto pick = [&](auto n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto link = [&](int a, int b) {
    NetLink l;
    l.a = a;
    l.b = b;
    static const double kBandwidths[] = {1e9, 2.5e9, 10e9, 25e9, 40e9, 100e9};
    l.bandwidth_bps = kBandwidths[pick(6)] * (0.5 + 0.01 * pick(100));
    l.latency_ns = pick(4) == 0 ? 0 : static_cast<std::int64_t>(rng() % 2'000'000);
    l.half_duplex = pick(4) == 0;
    return l;
  };
  // A random spanning tree, then a few extra links (cycles, parallel paths).
  for (int v = 1; v < c.nodes; ++v) c.links.push_back(link(pick(v), v));
  const int extra = pick(c.nodes);
  for (int k = 0; k < extra; ++k) {
    const int a = pick(c.nodes), b = pick(c.nodes);
    if (a != b) c.links.push_back(link(a, b));
  }
  // Hot spots make links shared: half the flows touch node 0.
  const int flows = 4 + pick(40);
  for (int k = 0; k < flows; ++k) {
    NetFlow f;
    f.src = pick(2) ? 0 : pick(c.nodes);
    do {
      f.dst = pick(c.nodes);
    } while (f.dst == f.src);
    if (pick(2)) std::swap(f.src, f.dst);
    f.bytes = pick(20) == 0 ? 0 : 1'000 + static_cast<std::int64_t>(rng() % 500'000'000);
    f.start_ns = pick(3) == 0 ? 0 : static_cast<std::int64_t>(rng() % 200'000'000);
    if (pick(5) == 0) f.cap_bps = 1e8 * (1 + pick(200));
    c.flows.push_back(f);
  }
  return c;
}

NetCase two_equal_flows() {
  NetCase c{"two-equal-flows", 2, {{0, 1, 1e9, 0, false}}, {}};
  c.flows.push_back({0, 1, 125'000'000, 0, 0, {}, 0});
  c.flows.push_back({0, 1, 125'000'000, 0, 0, {}, 0});
  return c;
}

NetCase parking_lot() {
  NetCase c{
      "parking-lot", 4, {{0, 1, 1e9, 0, false}, {1, 2, 2e9, 0, false}, {2, 3, 3e9, 0, false}}, {}};
  for (auto [s, d] : {std::pair{0, 3}, {0, 1}, {1, 2}, {2, 3}}) {
    c.flows.push_back({s, d, 125'000'000, 0, 0, {}, 0});
  }
  return c;
}

NetCase capped_flow_and_free_flow() {
  NetCase c{"cap", 2, {{0, 1, 1e9, 0, false}}, {}};
  c.flows.push_back({0, 1, 25'000'000, 0, 0.2e9, {}, 0});
  c.flows.push_back({0, 1, 100'000'000, 0, 0, {}, 0});
  return c;
}

/// The benchmark's workload classes, a few hundred transfers each (seconds in all).
std::vector<NetCase> workload_classes() {
  bench::LeafSpineWorkload leaf_spine;
  leaf_spine.transfers = 400;
  leaf_spine.wave = 100;
  bench::FatTreeWorkload fat_tree;
  fat_tree.transfers = 400;
  bench::IncastWorkload incast;
  incast.transfers = 640;
  bench::WanWorkload wan;
  wan.transfers = 300;
  return {bench::make_leaf_spine_case(leaf_spine), bench::make_fat_tree_case(fat_tree),
          bench::make_incast_case(incast), bench::make_wan_case(wan)};
}

TEST(SimgridDifferential, CompletionTimesAgreeWithinOnePpm) {
  std::mt19937_64 rng(20261130);
  std::vector<NetCase> cases{two_equal_flows(), parking_lot(), capped_flow_and_free_flow()};
  for (int i = 0; i < kRandomCases; ++i) cases.push_back(random_case(rng, i));
  for (NetCase& c : workload_classes()) cases.push_back(std::move(c));
  std::vector<KvshiftRun> ours;
  std::size_t flows = 0;
  for (NetCase& c : cases) {
    ours.push_back(run_kvshift(c));
    flows += c.flows.size();
  }
  // Hand-computed: both equal flows take 2 s; the parking lot's long flow 2 s, short ones
  // 2 s, 2/3 s and 0.4 s.
  EXPECT_EQ(ours[0].finish_s, (std::vector<double>{2.0, 2.0}));
  EXPECT_DOUBLE_EQ(ours[1].finish_s[0], 2.0);
  EXPECT_DOUBLE_EQ(ours[1].finish_s[3], 0.4);
  EXPECT_NEAR(ours[1].finish_s[2], 2.0 / 3, 1e-9);

  EXPECT_EQ(ours[2].finish_s, (std::vector<double>{1.0, 1.0}));

  const SimgridRun theirs = run_simgrid(cases);
  double worst = 0;
  std::string worst_at;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (std::size_t f = 0; f < cases[c].flows.size(); ++f) {
      const double a = ours[c].finish_s[f], b = theirs.finish_s[c][f];
      ASSERT_GE(b, 0) << cases[c].name << " flow " << f << " did not finish in SimGrid";
      const double rel = std::abs(a - b) / std::max(std::abs(b), 1e-9);
      if (rel > worst) {
        worst = rel;
        worst_at = cases[c].name + " flow " + std::to_string(f);
      }
      EXPECT_LE(rel, 1e-6) << cases[c].name << " flow " << f << ": kvshift " << a << " s, SimGrid "
                           << b << " s";
    }
  }
  std::cout << "[ differential ] " << cases.size() << " cases, " << flows
            << " flows; worst relative difference " << worst << " (" << worst_at << ")\n";
  RecordProperty("cases", static_cast<int>(cases.size()));
  RecordProperty("worst_relative_difference", std::to_string(worst));
}

}  // namespace
}  // namespace kvshift::sim::testing
