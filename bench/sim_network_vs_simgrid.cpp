// Network model speed and memory: kvshift's sim::Network against SimGrid (plain
// max-min, see tests/sim/simgrid/simgrid_runner.hpp) on the same flow sets, in
// one process. Two workloads (bench/sim_network_workloads.hpp): a leaf-spine
// with local contention and a k-ary fat-tree where every flow crosses the core
// (one giant contended component). SimGrid runs them one after the other in its
// one engine, so each is timed and metered apart.
//
// Reported per workload: CPU time (median of --repeat runs for kvshift; wall time
// too) and transfers/s of each simulator, the ratio, the worst relative
// difference of completion times, peak heap per transfer of each (kvshift: the
// growth during one run, topology and routes included; SimGrid: its platform for
// the case plus the peak growth during the case's run; bench/heap_meter.hpp), and
// the time-weighted mean number of concurrent flows per busy link direction (for
// the fat-tree also on core links only). Usage:
//   sim_network_vs_simgrid [--workload leaf-spine|fat-tree|both] [--repeat K] [--no-simgrid]
//     leaf-spine: [--transfers N] [--rate R] [--hot H] [--wave W] [--leaves L]
//                 [--per-leaf P] [--spines S]
//     fat-tree:   [--ft-transfers N] [--k K] [--ft-rate R] [--alpha A]
//   [--write-flows PREFIX] also writes each flow set as PREFIX<workload>.json for `kvshift flows`
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "bench/heap_meter.hpp"
#include "bench/sim_network_workloads.hpp"
#include "tests/sim/simgrid/simgrid_runner.hpp"

namespace {

using namespace kvshift::bench;
using namespace kvshift::sim::testing;

struct Options {
  LeafSpineWorkload leaf_spine;
  FatTreeWorkload fat_tree;
  bool run_leaf_spine = true;
  bool run_fat_tree = true;
  int repeat = 3;
  bool simgrid = true;
  std::string write_flows;  ///< also write each flow set as a flows file (PREFIX<name>.json)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto text = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    auto value = [&] { return std::atof(text().c_str()); };
    if (a == "--transfers")
      o.leaf_spine.transfers = static_cast<int>(value());
    else if (a == "--rate")
      o.leaf_spine.rate = value();
    else if (a == "--hot")
      o.leaf_spine.hot = static_cast<int>(value());
    else if (a == "--wave")
      o.leaf_spine.wave = static_cast<int>(value());
    else if (a == "--leaves")
      o.leaf_spine.leaves = static_cast<int>(value());
    else if (a == "--per-leaf")
      o.leaf_spine.per_leaf = static_cast<int>(value());
    else if (a == "--spines")
      o.leaf_spine.spines = static_cast<int>(value());
    else if (a == "--ft-transfers")
      o.fat_tree.transfers = static_cast<int>(value());
    else if (a == "--k")
      o.fat_tree.k = static_cast<int>(value());
    else if (a == "--ft-rate")
      o.fat_tree.rate = value();
    else if (a == "--alpha")
      o.fat_tree.pareto_alpha = value();
    else if (a == "--repeat")
      o.repeat = std::max(1, static_cast<int>(value()));
    else if (a == "--no-simgrid")
      o.simgrid = false;
    else if (a == "--write-flows")
      o.write_flows = text();
    else if (a == "--workload") {
      const std::string w = text();
      o.run_leaf_spine = w == "leaf-spine" || w == "both";
      o.run_fat_tree = w == "fat-tree" || w == "both";
      if (!o.run_leaf_spine && !o.run_fat_tree) {
        std::fprintf(stderr, "--workload: leaf-spine, fat-tree or both (got %s)\n", w.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.fat_tree.k < 2 || o.fat_tree.k % 2) {
    std::fprintf(stderr, "--k: must be even and >= 2\n");
    std::exit(2);
  }
  return o;
}

struct Measured {
  KvshiftRun run;
  double cpu = 0, wall = 0;  // medians
  double peak_bytes = 0;     // heap growth during one run
};

/// Runs `c` `repeat` times (the first also meters the heap and fills the routes).
Measured measure_kvshift(NetCase& c, int repeat) {
  Measured m;
  std::vector<double> cpus, walls;
  for (int r = 0; r < repeat; ++r) {
    const std::size_t before = heap_in_use();
    reset_heap_peak();
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    KvshiftRun run = run_kvshift(c, /*record_utilisation=*/false);
    cpus.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (r == 0) m.peak_bytes = static_cast<double>(heap_peak() - before);
    m.run = std::move(run);
  }
  std::sort(cpus.begin(), cpus.end());
  std::sort(walls.begin(), walls.end());
  m.cpu = cpus[cpus.size() / 2];
  m.wall = walls[walls.size() / 2];
  return m;
}

void describe(const NetCase& c, const Measured& m, const Options& o) {
  const double n = static_cast<double>(c.flows.size());
  std::printf("== %s: %zu transfers, %d nodes, %zu links, simulated %.2f s\n", c.name.c_str(),
              c.flows.size(), c.nodes, c.links.size(),
              *std::max_element(m.run.finish_s.begin(), m.run.finish_s.end()));
  std::printf("mean concurrent flows per busy link direction: %.1f",
              mean_flows_per_busy_link(c, m.run.finish_s));
  if (c.name == "fat-tree") {
    std::printf(" (core links: %.1f)",
                mean_flows_per_busy_link(c, m.run.finish_s, fat_tree_core_links(c, o.fat_tree.k)));
  }
  std::printf(
      "\nkvshift: median CPU %.3f s (wall %.3f s) over %d runs, %.0f transfers/s, peak heap "
      "%.1f MB = %.0f B/transfer (%llu events, %llu reshares, %.0f flows per reshare)\n",
      m.cpu, m.wall, o.repeat, n / m.cpu, m.peak_bytes / 1e6, m.peak_bytes / n,
      static_cast<unsigned long long>(m.run.events),
      static_cast<unsigned long long>(m.run.reshares),
      static_cast<double>(m.run.reshared_flows) / static_cast<double>(m.run.reshares));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // CPU time of this process is the measure (the wall clock of a shared machine is
  // noisy); both simulators are single-threaded. Wall time is printed too.
  std::vector<NetCase> cases;
  if (o.run_leaf_spine) cases.push_back(make_leaf_spine_case(o.leaf_spine));
  if (o.run_fat_tree) cases.push_back(make_fat_tree_case(o.fat_tree));
  if (!o.write_flows.empty()) {
    for (const NetCase& c : cases) {
      if (!write_flows_file(c, o.write_flows + c.name + ".json")) {
        std::fprintf(stderr, "--write-flows: cannot write %s%s.json\n", o.write_flows.c_str(),
                     c.name.c_str());
        return 2;
      }
    }
  }
  std::vector<Measured> ours;
  for (NetCase& c : cases) {
    ours.push_back(measure_kvshift(c, o.repeat));
    describe(c, ours.back(), o);
  }
  if (!o.simgrid) return 0;
  std::vector<double> sg_bytes(cases.size(), 0);
  std::size_t mark = 0;
  SimgridOptions so;
  so.one_case_at_a_time = true;
  so.on_phase = [&](std::size_t c, SimgridPhase p) {
    if (p == SimgridPhase::kPlatformBegin || p == SimgridPhase::kRunBegin) {
      mark = heap_in_use();
      reset_heap_peak();
    } else if (p == SimgridPhase::kPlatformEnd) {
      sg_bytes[c] += static_cast<double>(heap_in_use() - mark);
    } else {
      sg_bytes[c] += static_cast<double>(heap_peak() - mark);
    }
  };
  const SimgridRun theirs = run_simgrid(cases, so);
  std::printf(
      "\n| workload | transfers | kvshift transfers/s | SimGrid transfers/s | speed-up | worst "
      "rel. diff | kvshift B/transfer | SimGrid B/transfer |\n|---|---|---|---|---|---|---|---|\n");
  for (std::size_t k = 0; k < cases.size(); ++k) {
    double worst = 0;
    for (std::size_t i = 0; i < cases[k].flows.size(); ++i) {
      const double b = theirs.finish_s[k][i];
      worst = std::max(worst, std::abs(ours[k].run.finish_s[i] - b) / std::max(b, 1e-9));
    }
    const double n = static_cast<double>(cases[k].flows.size());
    std::printf("| %s | %.0f | %.0f | %.0f | %.2fx | %.2e | %.0f | %.0f |\n", cases[k].name.c_str(),
                n, n / ours[k].cpu, n / theirs.case_cpu_s[k], theirs.case_cpu_s[k] / ours[k].cpu,
                worst, ours[k].peak_bytes / n, sg_bytes[k] / n);
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    std::printf("simgrid %s: CPU %.3f s (wall %.3f s)\n", cases[k].name.c_str(),
                theirs.case_cpu_s[k], theirs.case_wall_s[k]);
  }
  return 0;
}
