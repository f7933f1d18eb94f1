// Cluster generators -> explicit nodes and links. Names (stable, used by
// events in scenario files):
//   star        switch; node0..node{n-1}; links "node<i>-switch"
//   ring        node0..node{n-1}; links "node<i>-node<i+1 mod n>"
//   leaf_spine  spine<s>, leaf<l>, node<i> (i = l·nodes_per_leaf + k, numbered across leaves);
//               links "node<i>-leaf<l>" and "leaf<l>-spine<s>"
//   multi_site  <site>-switch, <site>-node<i>; links "<site>-node<i>-<site>-switch";
//               WAN links "wan:<siteA>-<siteB>" for every pair of sites
#include "scenarios/scenario_parts.hpp"

namespace kvshift::scenarios::detail {
namespace {

void add_gpu_node(std::string name, const sim::NodeTemplate& t, Bytes hbm, std::string site,
                  sim::ClusterSpec& out) {
  out.nodes.push_back({std::move(name), sim::NodeKind::kGpu, t.gpus, hbm, t.host_memory,
                       std::move(site)});
}

void add_switch(std::string name, std::string site, sim::ClusterSpec& out) {
  out.nodes.push_back({std::move(name), sim::NodeKind::kSwitch, 0, Bytes{}, Bytes{}, std::move(site)});
}

void add_link(const std::string& a, const std::string& b, BitsPerSecond bw, Seconds lat,
              sim::ClusterSpec& out, std::string name = {}) {
  if (name.empty()) name = a + "-" + b;
  out.links.push_back({std::move(name), a, b, bw, lat, sim::Duplex::kFull});
}

}  // namespace

void expand_star(const sim::StarSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                 sim::ClusterSpec& out) {
  add_switch("switch", "", out);
  for (int i = 0; i < s.nodes; ++i) {
    const std::string n = "node" + std::to_string(i);
    add_gpu_node(n, t, hbm, "", out);
    add_link(n, "switch", s.bandwidth, s.latency, out);
  }
}

void expand_ring(const sim::RingSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                 sim::ClusterSpec& out) {
  for (int i = 0; i < s.nodes; ++i) add_gpu_node("node" + std::to_string(i), t, hbm, "", out);
  if (s.nodes < 2) return;
  // Two nodes make one link, not a doubled pair.
  const int links = s.nodes == 2 ? 1 : s.nodes;
  for (int i = 0; i < links; ++i) {
    add_link("node" + std::to_string(i), "node" + std::to_string((i + 1) % s.nodes), s.bandwidth,
             s.latency, out);
  }
}

void expand_leaf_spine(const sim::LeafSpineSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                       sim::ClusterSpec& out) {
  for (int sp = 0; sp < s.spines; ++sp) add_switch("spine" + std::to_string(sp), "", out);
  for (int l = 0; l < s.leaves; ++l) {
    const std::string leaf = "leaf" + std::to_string(l);
    add_switch(leaf, "", out);
    for (int sp = 0; sp < s.spines; ++sp) {
      add_link(leaf, "spine" + std::to_string(sp), s.uplink_bandwidth, s.latency, out);
    }
  }
  for (int l = 0; l < s.leaves; ++l) {
    for (int k = 0; k < s.nodes_per_leaf; ++k) {
      const std::string n = "node" + std::to_string(l * s.nodes_per_leaf + k);
      add_gpu_node(n, t, hbm, "", out);
      add_link(n, "leaf" + std::to_string(l), s.node_bandwidth, s.latency, out);
    }
  }
}

void expand_multi_site(const sim::MultiSiteSpec& s, const sim::NodeTemplate& t, Bytes hbm,
                       sim::ClusterSpec& out) {
  for (const sim::SiteSpec& site : s.sites) {
    const std::string sw = site.name + "-switch";
    add_switch(sw, site.name, out);
    for (int i = 0; i < site.nodes; ++i) {
      const std::string n = site.name + "-node" + std::to_string(i);
      add_gpu_node(n, t, hbm, site.name, out);
      add_link(n, sw, site.lan_bandwidth, site.lan_latency, out);
    }
  }
  for (std::size_t i = 0; i < s.sites.size(); ++i) {
    for (std::size_t j = i + 1; j < s.sites.size(); ++j) {
      add_link(s.sites[i].name + "-switch", s.sites[j].name + "-switch", s.wan_bandwidth,
               s.wan_latency, out, "wan:" + s.sites[i].name + "-" + s.sites[j].name);
    }
  }
}

}  // namespace kvshift::scenarios::detail
