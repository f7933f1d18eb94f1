// Writes one workload class of the process-level network benchmark
// (bench/flows_vs_simgrid.sh) as a `kvshift flows` file, which both commands
// compared there read: `kvshift flows FILE` and `simgrid_flows FILE`. Classes
// (bench/sim_network_workloads.hpp): leaf-spine (local contention in drain
// waves), fat-tree (every flow across the core, Poisson arrivals, Pareto
// sizes; 3,100 arrivals/s, 0.9 of core 0's capacity, so the load is steady
// however many transfers), fat-tree-overload (the in-process benchmark's 4,500
// arrivals/s, 1.3× what core 0 drains: its backlog, and the cost of every
// event with it, grows with the run's length), incast (bursts of senders to a
// few sinks), wan (long-lived flows between sites over WAN links of 10..17.5 ms).
// Usage:
//   network_flows_file CLASS TRANSFERS OUT.json
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/sim_network_workloads.hpp"

namespace {

using namespace kvshift::bench;
using kvshift::sim::testing::NetCase;

int usage() {
  std::fprintf(
      stderr,
      "usage: network_flows_file leaf-spine|fat-tree|fat-tree-overload|incast|wan TRANSFERS "
      "OUT.json\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return usage();
  const std::string kind = argv[1];
  char* end = nullptr;
  const long n = std::strtol(argv[2], &end, 10);
  if (*end != '\0' || n < 1 || n > 100'000'000) {
    std::fprintf(stderr, "TRANSFERS: expected an integer in 1..1e8 (got %s)\n", argv[2]);
    return 2;
  }
  const int transfers = static_cast<int>(n);
  NetCase c;
  if (kind == "leaf-spine") {
    LeafSpineWorkload w;
    w.transfers = transfers;
    c = make_leaf_spine_case(w);
  } else if (kind == "fat-tree" || kind == "fat-tree-overload") {
    FatTreeWorkload w;
    w.transfers = transfers;
    if (kind == "fat-tree") w.rate = 3'100;
    c = make_fat_tree_case(w);
  } else if (kind == "incast") {
    IncastWorkload w;
    w.transfers = transfers;
    c = make_incast_case(w);
  } else if (kind == "wan") {
    WanWorkload w;
    w.transfers = transfers;
    c = make_wan_case(w);
  } else {
    std::fprintf(
        stderr, "CLASS: expected leaf-spine, fat-tree, fat-tree-overload, incast or wan (got %s)\n",
        kind.c_str());
    return 2;
  }
  if (!write_flows_file(c, argv[3])) {
    std::fprintf(stderr, "cannot write %s\n", argv[3]);
    return 1;
  }
  return 0;
}
