// Flow sets of the network benchmark (see sim_network_workloads.hpp).
#include "bench/sim_network_workloads.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "sim/generators.hpp"

namespace kvshift::bench {
using namespace kvshift::sim;
using sim::testing::NetCase;
using sim::testing::NetFlow;
using sim::testing::NetLink;

namespace {

void copy_links(const Topology& t, NetCase& c) {
  c.nodes = static_cast<int>(t.node_count());
  for (LinkId l = 0; l < t.link_count(); ++l) {
    const ClusterLink& s = t.link(l);
    c.links.push_back(
        {static_cast<int>(s.a), static_cast<int>(s.b), s.bandwidth.value, s.latency.ns, false});
  }
}

}  // namespace

NetCase make_leaf_spine_case(const LeafSpineWorkload& w) {
  Cluster cluster;
  LeafSpineParams p;
  p.leaves = w.leaves;
  p.spines = w.spines;
  p.nodes_per_leaf = w.per_leaf;
  p.host = LinkParams{BitsPerSecond{100e9}, microseconds(1)};
  p.oversubscription = 2;
  p.uplink_latency = microseconds(1);
  const GeneratedNodes g = add_leaf_spine(cluster, p);
  Topology t(cluster);
  NetCase c;
  c.name = "leaf-spine";
  copy_links(t, c);
  std::mt19937_64 rng(12345);
  std::exponential_distribution<double> gap(w.rate);
  std::uniform_int_distribution<std::int64_t> size(10'000'000, 400'000'000);
  std::vector<int> nodes(g.gpus.begin(), g.gpus.end());
  std::vector<int> src, dst;
  double t_s = 0;
  for (int k = 0; k < w.transfers; ++k) {
    if (k % w.wave == 0) {
      std::shuffle(nodes.begin(), nodes.end(), rng);
      src.assign(nodes.begin(), nodes.begin() + w.hot);
      dst.assign(nodes.begin() + w.hot, nodes.begin() + 2 * w.hot);
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

NetCase make_fat_tree_case(const FatTreeWorkload& w) {
  const int half = w.k / 2;
  NetCase c;
  c.name = "fat-tree";
  // Node ids: cores, then per pod its aggregation switches, edge switches and hosts.
  const int cores = half * half;
  const int per_pod = half + half + half * half;
  c.nodes = cores + w.k * per_pod;
  auto link = [&](int a, int b) { c.links.push_back({a, b, 100e9, 1'000, false}); };
  std::vector<int> hosts, pod_of;
  for (int p = 0; p < w.k; ++p) {
    const int base = cores + p * per_pod;
    for (int e = 0; e < half; ++e) {
      const int edge = base + half + e;
      for (int h = 0; h < half; ++h) {
        const int host = base + 2 * half + e * half + h;
        link(host, edge);
        hosts.push_back(host);
        pod_of.push_back(p);
      }
      for (int a = 0; a < half; ++a) link(edge, base + a);
    }
    for (int a = 0; a < half; ++a) {
      for (int j = 0; j < half; ++j) link(base + a, a * half + j);
    }
  }
  std::mt19937_64 rng(271828);
  std::exponential_distribution<double> gap(w.rate);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
  double t_s = 0;
  for (int n = 0; n < w.transfers; ++n) {
    t_s += gap(rng);
    NetFlow f;
    const std::size_t s = pick(rng);
    std::size_t d = pick(rng);
    while (pod_of[d] == pod_of[s]) d = pick(rng);
    f.src = hosts[s];
    f.dst = hosts[d];
    const double x = w.min_bytes / std::pow(1 - u(rng), 1 / w.pareto_alpha);
    f.bytes = static_cast<std::int64_t>(std::min(x, w.max_bytes));
    f.start_ns = static_cast<std::int64_t>(t_s * 1e9);
    c.flows.push_back(f);
  }
  return c;
}

NetCase make_incast_case(const IncastWorkload& w) {
  Cluster cluster;
  LeafSpineParams p;
  p.leaves = w.leaves;
  p.spines = w.spines;
  p.nodes_per_leaf = w.per_leaf;
  p.host = LinkParams{BitsPerSecond{100e9}, microseconds(1)};
  p.uplink_latency = microseconds(1);
  const GeneratedNodes g = add_leaf_spine(cluster, p);
  NetCase c;
  c.name = "incast";
  copy_links(Topology(cluster), c);
  std::vector<int> sinks, senders;
  for (std::size_t i = 0; i < g.gpus.size(); ++i) {
    const int leaf = static_cast<int>(i) / w.per_leaf;
    const bool sink = i % static_cast<std::size_t>(w.per_leaf) == 0 && leaf % 2 == 0 &&
                      static_cast<int>(sinks.size()) < w.sinks;
    (sink ? sinks : senders).push_back(static_cast<int>(g.gpus[i]));
  }
  std::mt19937_64 rng(31337);
  std::exponential_distribution<double> gap(w.bursts_per_s);
  std::uniform_int_distribution<std::int64_t> size(1'000'000, 16'000'000);
  double t_s = 0;
  for (int n = 0; n < w.transfers; ++n) {
    if (n % w.fan_in == 0) t_s += gap(rng);  // a burst: fan_in senders to one sink at once
    NetFlow f;
    f.src = senders[rng() % senders.size()];
    f.dst = sinks[static_cast<std::size_t>(n / w.fan_in) % sinks.size()];
    f.bytes = size(rng);
    f.start_ns = static_cast<std::int64_t>(t_s * 1e9);
    c.flows.push_back(f);
  }
  return c;
}

NetCase make_wan_case(const WanWorkload& w) {
  NetCase c;
  c.name = "wan";
  // Node ids: per site its gateway, then its hosts.
  const int per_site = 1 + w.per_site;
  c.nodes = w.sites * per_site;
  std::vector<int> hosts, site_of;
  for (int s = 0; s < w.sites; ++s) {
    for (int h = 0; h < w.per_site; ++h) {
      c.links.push_back({s * per_site + 1 + h, s * per_site, 100e9, 1'000, false});
      hosts.push_back(s * per_site + 1 + h);
      site_of.push_back(s);
    }
  }
  // 10..17.5 ms: any two WAN hops take longer than the direct link, so (routing being by
  // latency) every site pair's traffic takes its own link and each carries the load `rate`
  // was set for. With 5..20 ms, 0-3 and 1-2 traffic detoured over the 5 ms link 1-3 and put
  // it at 2.25× its capacity: the backlog grew without end.
  for (int a = 0; a < w.sites; ++a) {
    for (int b = a + 1; b < w.sites; ++b) {
      const std::int64_t latency_ns = 10'000'000 + 2'500'000 * ((a + b) % 4);
      c.links.push_back({a * per_site, b * per_site, 400e9, latency_ns, false});
    }
  }
  std::mt19937_64 rng(4242);
  std::exponential_distribution<double> gap(w.rate);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
  double t_s = 0;
  for (int n = 0; n < w.transfers; ++n) {
    t_s += gap(rng);
    NetFlow f;
    const std::size_t s = pick(rng);
    std::size_t d = pick(rng);
    while (site_of[d] == site_of[s]) d = pick(rng);
    f.src = hosts[s];
    f.dst = hosts[d];
    f.bytes = static_cast<std::int64_t>(1e9 * std::pow(50.0, u(rng)));
    f.start_ns = static_cast<std::int64_t>(t_s * 1e9);
    c.flows.push_back(f);
  }
  return c;
}

std::vector<bool> fat_tree_core_links(const NetCase& c, int k) {
  const int cores = (k / 2) * (k / 2);
  std::vector<bool> out;
  for (const auto& l : c.links) out.push_back(l.a < cores || l.b < cores);
  return out;
}

double mean_flows_per_busy_link(const NetCase& c, const std::vector<double>& finish,
                                const std::vector<bool>& counted) {
  std::map<std::pair<int, bool>, std::vector<std::pair<double, int>>> edges;
  for (std::size_t i = 0; i < c.flows.size(); ++i) {
    const NetFlow& f = c.flows[i];
    const double begin = 1e-9 * static_cast<double>(f.start_ns + f.route_latency_ns);
    for (const auto& hop : f.route) {
      if (!counted.empty() && !counted[static_cast<std::size_t>(hop.first)]) continue;
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

/// `c` as a `kvshift flows` file (nodes n<i>, links l<j>, transfers t<k>), for its memory.
bool write_flows_file(const NetCase& c, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  std::fprintf(f, "{\"cluster\": {\"nodes\": [");
  for (int i = 0; i < c.nodes; ++i) std::fprintf(f, "%s{\"name\": \"n%d\"}", i ? ", " : "", i);
  std::fprintf(f, "],\n \"links\": [");
  for (std::size_t j = 0; j < c.links.size(); ++j) {
    const NetLink& l = c.links[j];
    std::fprintf(f,
                 "%s\n  {\"name\": \"l%zu\", \"a\": \"n%d\", \"b\": \"n%d\", \"bandwidth\": "
                 "\"%.17gbps\", \"latency\": \"%lldns\"}",
                 j ? "," : "", j, l.a, l.b, l.bandwidth_bps, static_cast<long long>(l.latency_ns));
  }
  std::fprintf(f, "]},\n \"transfers\": [");
  for (std::size_t k = 0; k < c.flows.size(); ++k) {
    const NetFlow& t = c.flows[k];
    std::fprintf(f,
                 "%s\n  {\"id\": \"t%zu\", \"src\": \"n%d\", \"dst\": \"n%d\", \"bytes\": %lld, "
                 "\"start\": \"%lldns\"}",
                 k ? "," : "", k, t.src, t.dst, static_cast<long long>(t.bytes),
                 static_cast<long long>(t.start_ns));
  }
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

}  // namespace kvshift::bench
