// Network model speed: kvshift's sim::Network against SimGrid (plain max-min,
// see tests/sim/simgrid/simgrid_runner.hpp) on one flow set, in one run.
//
// Flow set: a two-tier leaf-spine of --leaves x --per-leaf GPU nodes (default
// 25 x 40 = 1,000) and --spines spines, 100 Gbps host links, oversubscription
// 2. KV migrations come in drain waves: each wave picks --hot source nodes and
// --hot destination nodes at random (over time every node takes part) and
// issues --wave transfers between them (10 MB..400 MB, Poisson arrivals at
// --rate per second; the defaults, 10 and 1,500/s, give about 50 concurrent
// flows per busy link). Reported: CPU time (and wall time) and transfers/s of
// each simulator, the ratio, the worst relative difference of completion
// times, and the time-weighted mean number of concurrent flows per busy link
// direction (one carrying at least one flow). Usage:
//   sim_network_vs_simgrid [--transfers N] [--rate R] [--hot H] [--wave W]
//                          [--leaves L] [--per-leaf P] [--spines S] [--repeat K]
//                          [--no-simgrid]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>

#include "sim/generators.hpp"
#include "tests/sim/simgrid/simgrid_runner.hpp"

namespace {

using namespace kvshift::sim;
using namespace kvshift::sim::testing;

struct Options {
  int transfers = 100'000;
  double rate = 1'500;
  int hot = 10;
  int wave = 1'000;
  int leaves = 25;
  int per_leaf = 40;
  int spines = 4;
  int repeat = 3;
  bool simgrid = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atof(argv[++i]);
    };
    if (a == "--transfers") o.transfers = static_cast<int>(value());
    else if (a == "--rate") o.rate = value();
    else if (a == "--hot") o.hot = static_cast<int>(value());
    else if (a == "--wave") o.wave = static_cast<int>(value());
    else if (a == "--leaves") o.leaves = static_cast<int>(value());
    else if (a == "--per-leaf") o.per_leaf = static_cast<int>(value());
    else if (a == "--spines") o.spines = static_cast<int>(value());
    else if (a == "--repeat") o.repeat = static_cast<int>(value());
    else if (a == "--no-simgrid") o.simgrid = false;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

NetCase make_case(const Options& o) {
  Topology t;
  LeafSpineParams p;
  p.leaves = o.leaves;
  p.spines = o.spines;
  p.nodes_per_leaf = o.per_leaf;
  p.host = LinkParams{kvshift::BitsPerSecond{100e9}, microseconds(1)};
  p.oversubscription = 2;
  p.uplink_latency = microseconds(1);
  const GeneratedNodes g = add_leaf_spine(t, p);
  NetCase c;
  c.name = "leaf-spine";
  c.nodes = static_cast<int>(t.node_count());
  for (LinkId l = 0; l < t.link_count(); ++l) {
    const ClusterLink& s = t.link(l);
    c.links.push_back({static_cast<int>(s.a), static_cast<int>(s.b), s.bandwidth.value, s.latency.ns,
                       false});
  }
  std::mt19937_64 rng(12345);
  std::exponential_distribution<double> gap(o.rate);
  std::uniform_int_distribution<std::int64_t> size(10'000'000, 400'000'000);
  std::vector<int> nodes(g.gpus.begin(), g.gpus.end());
  std::vector<int> src, dst;
  double t_s = 0;
  for (int k = 0; k < o.transfers; ++k) {
    if (k % o.wave == 0) {
      std::shuffle(nodes.begin(), nodes.end(), rng);
      src.assign(nodes.begin(), nodes.begin() + o.hot);
      dst.assign(nodes.begin() + o.hot, nodes.begin() + 2 * o.hot);
    }
    t_s += gap(rng);
    NetFlow f;
    f.src = src[rng() % src.size()];
    f.dst = dst[rng() % dst.size()];
    f.bytes = size(rng);
    f.start_ns = static_cast<std::int64_t>(t_s * 1e9);
    c.flows.push_back(f);
  }
  return c;
}

/// Time-weighted mean flows per busy channel, from each flow's sharing interval.
double mean_flows_per_busy_link(const NetCase& c, const std::vector<double>& finish) {
  std::map<std::pair<int, bool>, std::vector<std::pair<double, int>>> edges;
  for (std::size_t i = 0; i < c.flows.size(); ++i) {
    const NetFlow& f = c.flows[i];
    const double begin = 1e-9 * static_cast<double>(f.start_ns + f.route_latency_ns);
    for (const auto& hop : f.route) {
      auto& e = edges[hop];
      e.emplace_back(begin, +1);
      e.emplace_back(finish[i], -1);
    }
  }
  double flow_time = 0, busy_time = 0;
  for (auto& [key, e] : edges) {
    std::sort(e.begin(), e.end());
    int n = 0;
    double last = 0;
    for (const auto& [t, d] : e) {
      if (n > 0) {
        flow_time += n * (t - last);
        busy_time += t - last;
      }
      n += d;
      last = t;
    }
  }
  return busy_time > 0 ? flow_time / busy_time : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  NetCase c = make_case(o);
  // CPU time of this process is the measure (the wall clock of a shared machine is
  // noisy); both simulators are single-threaded. Wall time is printed too.
  std::vector<double> cpus, walls;
  KvshiftRun ours;
  for (int r = 0; r < o.repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    ours = run_kvshift(c, /*record_utilisation=*/false);
    cpus.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(cpus.begin(), cpus.end());
  std::sort(walls.begin(), walls.end());
  const double kv_cpu = cpus[cpus.size() / 2];
  const double kv_wall = walls[walls.size() / 2];
  const double n = static_cast<double>(c.flows.size());
  std::printf("flow set: %zu transfers, %d nodes, %zu links, simulated %.2f s\n", c.flows.size(),
              c.nodes, c.links.size(), *std::max_element(ours.finish_s.begin(), ours.finish_s.end()));
  std::printf("mean concurrent flows per busy link direction: %.1f\n",
              mean_flows_per_busy_link(c, ours.finish_s));
  std::printf("kvshift: median CPU %.3f s (wall %.3f s) over %d runs, %.0f transfers/s (%llu "
              "events, %llu reshares, %.0f flows per reshare)\n",
              kv_cpu, kv_wall, o.repeat, n / kv_cpu, static_cast<unsigned long long>(ours.events),
              static_cast<unsigned long long>(ours.reshares),
              static_cast<double>(ours.reshared_flows) / static_cast<double>(ours.reshares));
  if (!o.simgrid) return 0;
  const SimgridRun theirs = run_simgrid({c});
  double worst = 0;
  for (std::size_t i = 0; i < c.flows.size(); ++i) {
    const double b = theirs.finish_s[0][i];
    worst = std::max(worst, std::abs(ours.finish_s[i] - b) / std::max(b, 1e-9));
  }
  std::printf("simgrid: CPU %.3f s (wall %.3f s), %.0f transfers/s\n", theirs.cpu_s, theirs.wall_s,
              n / theirs.cpu_s);
  std::printf("speed-up kvshift/simgrid: %.2fx; worst relative difference of completion times %.2e\n",
              theirs.cpu_s / kv_cpu, worst);
  return 0;
}
