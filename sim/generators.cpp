// Generated clusters: star, ring, leaf-spine, multi-site.
#include "sim/generators.hpp"

#include <set>

#include "cost_model/input_error.hpp"

namespace kvshift::sim {
namespace {

NodeId add_node(Cluster& c, ClusterNode n) {
  c.nodes.push_back(std::move(n));
  return static_cast<NodeId>(c.nodes.size() - 1);
}

NodeId add_gpu(Cluster& c, const GpuNodeTemplate& tmpl, std::string name, std::string site = "") {
  return add_node(c, {std::move(name), NodeKind::kGpu, tmpl.gpu_model, tmpl.gpu_count,
                      tmpl.hbm_per_gpu, tmpl.host_memory, std::move(site)});
}

NodeId add_switch(Cluster& c, std::string name, std::string site = "") {
  ClusterNode n;
  n.name = std::move(name);
  n.kind = NodeKind::kSwitch;
  n.site = std::move(site);
  return add_node(c, std::move(n));
}

void connect(Cluster& c, NodeId a, NodeId b, const LinkParams& p) {
  c.links.push_back(
      {c.nodes[a].name + "-" + c.nodes[b].name, a, b, p.bandwidth, p.latency, p.duplex});
}

void require(bool ok, const std::string& what) {
  if (!ok) throw InputError(what);
}

}  // namespace

GeneratedNodes add_star(Cluster& c, int nodes, const LinkParams& link, const GpuNodeTemplate& node,
                        const std::string& prefix) {
  require(nodes >= 1, "star: nodes must be >= 1 (got " + std::to_string(nodes) + ")");
  GeneratedNodes g;
  const NodeId hub = add_switch(c, prefix + "hub");
  g.switches.push_back(hub);
  for (int i = 0; i < nodes; ++i) {
    g.gpus.push_back(add_gpu(c, node, prefix + "gpu" + std::to_string(i)));
    connect(c, g.gpus.back(), hub, link);
  }
  return g;
}

GeneratedNodes add_ring(Cluster& c, int nodes, const LinkParams& link, const GpuNodeTemplate& node,
                        const std::string& prefix) {
  require(nodes >= 3, "ring: nodes must be >= 3 (got " + std::to_string(nodes) + ")");
  GeneratedNodes g;
  for (int i = 0; i < nodes; ++i)
    g.gpus.push_back(add_gpu(c, node, prefix + "gpu" + std::to_string(i)));
  for (int i = 0; i < nodes; ++i) connect(c, g.gpus[i], g.gpus[(i + 1) % nodes], link);
  return g;
}

GeneratedNodes add_leaf_spine(Cluster& c, const LeafSpineParams& p, const GpuNodeTemplate& node,
                              const std::string& prefix) {
  require(p.leaves >= 1, "leaf_spine: leaves must be >= 1");
  require(p.spines >= 1, "leaf_spine: spines must be >= 1");
  require(p.nodes_per_leaf >= 1, "leaf_spine: nodes_per_leaf must be >= 1");
  require(p.oversubscription > 0, "leaf_spine: oversubscription must be > 0");
  GeneratedNodes g;
  std::vector<NodeId> leaves, spines;
  for (int i = 0; i < p.leaves; ++i)
    leaves.push_back(add_switch(c, prefix + "leaf" + std::to_string(i)));
  for (int j = 0; j < p.spines; ++j)
    spines.push_back(add_switch(c, prefix + "spine" + std::to_string(j)));
  g.switches = leaves;
  g.switches.insert(g.switches.end(), spines.begin(), spines.end());
  int index = 0;
  for (int i = 0; i < p.leaves; ++i) {
    for (int k = 0; k < p.nodes_per_leaf; ++k) {
      g.gpus.push_back(add_gpu(c, node, prefix + "gpu" + std::to_string(index++)));
      connect(c, g.gpus.back(), leaves[i], p.host);
    }
  }
  const LinkParams up{
      p.uplink_bandwidth.value_or(BitsPerSecond{p.nodes_per_leaf * p.host.bandwidth.value /
                                                (p.spines * p.oversubscription)}),
      p.uplink_latency, p.host.duplex};
  for (const NodeId l : leaves) {
    for (const NodeId s : spines) connect(c, l, s, up);
  }
  return g;
}

GeneratedNodes add_multi_site(Cluster& c, const MultiSiteParams& p, const GpuNodeTemplate& node,
                              const std::string& prefix) {
  require(p.sites.size() >= 2,
          "multi_site: needs at least 2 sites (got " + std::to_string(p.sites.size()) + ")");
  std::set<std::string> names;
  for (const SiteParams& s : p.sites) {
    require(!s.name.empty(), "multi_site: a site's name must not be empty");
    require(names.insert(s.name).second, "multi_site: two sites are named \"" + s.name + "\"");
    require(s.nodes >= 1, "multi_site: site \"" + s.name + "\" needs nodes >= 1");
  }
  GeneratedNodes g;
  for (const SiteParams& s : p.sites) {
    const std::string site = prefix + s.name;
    const NodeId gw = add_switch(c, site + "/gw", site);
    g.switches.push_back(gw);
    for (int i = 0; i < s.nodes; ++i) {
      g.gpus.push_back(add_gpu(c, node, site + "/gpu" + std::to_string(i), site));
      connect(c, g.gpus.back(), gw, s.lan);
    }
  }
  for (std::size_t a = 0; a < g.switches.size(); ++a) {
    for (std::size_t b = a + 1; b < g.switches.size(); ++b)
      connect(c, g.switches[a], g.switches[b], p.wan);
  }
  return g;
}

}  // namespace kvshift::sim
