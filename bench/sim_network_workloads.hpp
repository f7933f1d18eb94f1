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
// incast: many to one. Bursts (Poisson) of fan_in transfers that start at once
// from random nodes of a leaf-spine to one sink (the sinks take turns), 1..16
// MB each: a sink's downlink is shared by every sender of its bursts in flight.
// wan: a multi-site cluster (sites joined by a full mesh of WAN links with
// tens of ms of latency), long-lived transfers of GBs between sites, Poisson
// arrivals: hundreds of flows in flight for seconds each.
// Left out: the workload's own randomness across runs (fixed seeds).
#pragma once

#include <cstdint>
#include <string>
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

struct IncastWorkload {
  int transfers = 20'000;
  int leaves = 8;
  int per_leaf = 16;
  int spines = 4;
  int sinks = 4;             ///< receivers (node 0 of leaves 0, 2, 4, ...)
  int fan_in = 64;           ///< transfers per burst
  double bursts_per_s = 64;  ///< about 0.7 of the sinks' capacity
};

struct WanWorkload {
  int transfers = 20'000;
  int sites = 4;
  int per_site = 16;
  double rate = 36;  ///< arrivals per simulated second (0.75 of each WAN link's capacity)
};

/// 10 MB..400 MB transfers in waves, 100 Gbps hosts, oversubscription 2.
sim::testing::NetCase make_leaf_spine_case(const LeafSpineWorkload& w);
/// 100 Gbps links everywhere, 1 us per link.
sim::testing::NetCase make_fat_tree_case(const FatTreeWorkload& w);
/// Bursts of 1 MB..16 MB transfers from random nodes to one sink; 100 Gbps, 1 us links.
sim::testing::NetCase make_incast_case(const IncastWorkload& w);
/// 1 GB..50 GB (log-uniform) transfers between nodes of different sites; 100 Gbps, 1 us LAN
/// links, 400 Gbps WAN links of 10..17.5 ms (each site pair's traffic on its own link).
sim::testing::NetCase make_wan_case(const WanWorkload& w);
/// Links of the fat-tree case that touch a core switch (for the concurrency figure).
std::vector<bool> fat_tree_core_links(const sim::testing::NetCase& c, int k);

/// Time-weighted mean number of flows per busy channel (one carrying >= 1 flow), over
/// the links `counted` selects (all when empty), from each flow's sharing interval.
double mean_flows_per_busy_link(const sim::testing::NetCase& c, const std::vector<double>& finish,
                                const std::vector<bool>& counted = {});

/// `c` as a `kvshift flows` file (nodes n<i>, links l<j>, transfers t<k>); false when it
/// cannot be written.
bool write_flows_file(const sim::testing::NetCase& c, const std::string& path);

}  // namespace kvshift::bench
