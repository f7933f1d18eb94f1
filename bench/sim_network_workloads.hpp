// The two flow sets of bench/network_vs_simgrid.sh, as NetCases (plain numbers
// both kvshift and SimGrid read).
//
// leaf-spine: drain waves of KV migrations on a two-tier leaf-spine; contention
// stays local (a wave's hot nodes), components stay small.
// fat-tree: a k-ary fat-tree (k pods of k/2 edge and k/2 aggregation switches,
// (k/2)^2 cores, k^3/4 hosts), every transfer between hosts of different pods
// (so every one crosses the core), Poisson arrivals, Pareto sizes. With
// single-path routing (lowest link id among the shortest paths) all inter-pod
// traffic funnels through core 0, so the flows <-> links graph is one giant
// contended component: the case that stresses an incremental solver most.
// Left out: the workload's own randomness across runs (fixed seeds).
#pragma once

#include <cstdint>
#include <vector>

#include "tests/sim/simgrid/net_case.hpp"

namespace kvshift::bench {

struct LeafSpineWorkload {
  int transfers = 100'000;
  double rate = 1'500;  ///< arrivals per simulated second
  int hot = 10;         ///< sources and destinations per wave
  int wave = 1'000;     ///< transfers per wave
  int leaves = 25;
  int per_leaf = 40;
  int spines = 4;
};

struct FatTreeWorkload {
  int transfers = 20'000;
  int k = 8;                  ///< ports per switch (even): k^3/4 hosts
  double rate = 4'500;        ///< arrivals per simulated second (more than core 0 drains)
  double pareto_alpha = 1.5;  ///< size tail index
  double min_bytes = 10e6;    ///< Pareto scale (smallest size)
  double max_bytes = 10e9;    ///< sizes are truncated here
};

/// 10 MB..400 MB transfers in waves, 100 Gbps hosts, oversubscription 2.
sim::testing::NetCase make_leaf_spine_case(const LeafSpineWorkload& w);
/// 100 Gbps links everywhere, 1 us per link.
sim::testing::NetCase make_fat_tree_case(const FatTreeWorkload& w);
/// Links of the fat-tree case that touch a core switch (for the concurrency figure).
std::vector<bool> fat_tree_core_links(const sim::testing::NetCase& c, int k);

/// Time-weighted mean number of flows per busy channel (one carrying >= 1 flow), over
/// the links `counted` selects (all when empty), from each flow's sharing interval.
double mean_flows_per_busy_link(const sim::testing::NetCase& c, const std::vector<double>& finish,
                                const std::vector<bool>& counted = {});

}  // namespace kvshift::bench
