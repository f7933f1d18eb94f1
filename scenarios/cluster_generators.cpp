// Cluster generators -> explicit nodes and links. Names and order match the
// simulator's own generators (sim/generators.hpp) so events can name nodes the
// same way whichever side builds the graph:
//   star        hub; gpu0..gpu{n-1}; links "gpu<i>-hub"
//   ring        gpu0..gpu{n-1} (n >= 3); links "gpu<i>-gpu<i+1 mod n>"
//   leaf_spine  leaf<l>, spine<s>, gpu<i> (i = l·nodes_per_leaf + k, numbered across leaves);
//               links "gpu<i>-leaf<l>", then "leaf<l>-spine<s>"
//   multi_site  per site: "<site>/gw" and "<site>/gpu<i>" with links "<site>/gpu<i>-<site>/gw";
//               WAN links "<a>/gw-<b>/gw" between every pair of sites
#include "scenarios/scenario_parts.hpp"

namespace kvshift::scenarios::detail {
namespace {

void add_gpu_node(std::string name, const sim::NodeTemplate& t, Bytes hbm, std::string site,
                  sim::ClusterSpec& out) {
  out.nodes.push_back(
      {std::move(name), sim::NodeKind::kGpu, t.gpus, hbm, t.host_memory, std::move(site)});
}

void add_switch(std::string name, std::string site, sim::ClusterSpec& out) {
  out.nodes.push_back(
      {std::move(name), sim::NodeKind::kSwitch, 0, Bytes{}, Bytes{}, std::move(site)});
}

void add_link(const std::string& a, const std::string& b, BitsPerSecond bw, Seconds lat,
              sim::ClusterSpec& out) {
  out.links.push_back({a + "-" + b, a, b, bw, lat, sim::Duplex::kFull});
}

}  // namespace

void expand_star(const sim::StarSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                 sim::ClusterSpec& out) {
  add_switch("hub", "", out);
  for (int i = 0; i < s.nodes; ++i) {
    const std::string n = "gpu" + std::to_string(i);
    add_gpu_node(n, t, hbm, "", out);
    add_link(n, "hub", s.bandwidth, s.latency, out);
  }
}

void expand_ring(const sim::RingSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                 sim::ClusterSpec& out) {
  for (int i = 0; i < s.nodes; ++i) add_gpu_node("gpu" + std::to_string(i), t, hbm, "", out);
  for (int i = 0; i < s.nodes; ++i) {
    add_link("gpu" + std::to_string(i), "gpu" + std::to_string((i + 1) % s.nodes), s.bandwidth,
             s.latency, out);
  }
}

void expand_leaf_spine(const sim::LeafSpineSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                       sim::ClusterSpec& out) {
  for (int l = 0; l < s.leaves; ++l) add_switch("leaf" + std::to_string(l), "", out);
  for (int sp = 0; sp < s.spines; ++sp) add_switch("spine" + std::to_string(sp), "", out);
  for (int l = 0; l < s.leaves; ++l) {
    for (int k = 0; k < s.nodes_per_leaf; ++k) {
      const std::string n = "gpu" + std::to_string(l * s.nodes_per_leaf + k);
      add_gpu_node(n, t, hbm, "", out);
      add_link(n, "leaf" + std::to_string(l), s.node_bandwidth, s.latency, out);
    }
  }
  for (int l = 0; l < s.leaves; ++l) {
    for (int sp = 0; sp < s.spines; ++sp) {
      add_link("leaf" + std::to_string(l), "spine" + std::to_string(sp), s.uplink_bandwidth,
               s.latency, out);
    }
  }
}

void expand_multi_site(const sim::MultiSiteSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                       sim::ClusterSpec& out) {
  for (const sim::SiteSpec& site : s.sites) {
    const std::string gw = site.name + "/gw";
    add_switch(gw, site.name, out);
    for (int i = 0; i < site.nodes; ++i) {
      const std::string n = site.name + "/gpu" + std::to_string(i);
      add_gpu_node(n, t, hbm, site.name, out);
      add_link(n, gw, site.lan_bandwidth, site.lan_latency, out);
    }
  }
  for (std::size_t i = 0; i < s.sites.size(); ++i) {
    for (std::size_t j = i + 1; j < s.sites.size(); ++j) {
      add_link(s.sites[i].name + "/gw", s.sites[j].name + "/gw", s.wan_bandwidth, s.wan_latency,
               out);
    }
  }
}

}  // namespace kvshift::scenarios::detail
