// Generated topologies: star, ring, leaf-spine, multi-site WAN.
#include "sim/generators.hpp"

#include "cost_model/input_error.hpp"

namespace kvshift::sim {
namespace {

NodeId add_gpu(Topology& t, const GpuNodeTemplate& tmpl, std::string name) {
  ClusterNode n;
  n.name = std::move(name);
  n.kind = NodeType::kGpu;
  n.gpu_model = tmpl.gpu_model;
  n.gpu_count = tmpl.gpu_count;
  n.hbm_per_gpu = tmpl.hbm_per_gpu;
  n.host_memory = tmpl.host_memory;
  return t.add_node(std::move(n));
}

void connect(Topology& t, NodeId a, NodeId b, const LinkParams& p) {
  t.add_link(
      ClusterLink{t.node(a).name + "-" + t.node(b).name, a, b, p.bandwidth, p.latency, p.duplex});
}

void require(bool ok, const std::string& what) {
  if (!ok) throw InputError(what);
}

}  // namespace

GeneratedNodes add_star(Topology& t, int nodes, const LinkParams& link, const GpuNodeTemplate& node,
                        const std::string& prefix) {
  require(nodes >= 1, "star: nodes must be >= 1 (got " + std::to_string(nodes) + ")");
  GeneratedNodes g;
  const NodeId hub = t.add_switch(prefix + "hub");
  g.switches.push_back(hub);
  for (int i = 0; i < nodes; ++i) {
    g.gpus.push_back(add_gpu(t, node, prefix + "gpu" + std::to_string(i)));
    connect(t, g.gpus.back(), hub, link);
  }
  return g;
}

GeneratedNodes add_ring(Topology& t, int nodes, const LinkParams& link, const GpuNodeTemplate& node,
                        const std::string& prefix) {
  require(nodes >= 3, "ring: nodes must be >= 3 (got " + std::to_string(nodes) + ")");
  GeneratedNodes g;
  for (int i = 0; i < nodes; ++i)
    g.gpus.push_back(add_gpu(t, node, prefix + "gpu" + std::to_string(i)));
  for (int i = 0; i < nodes; ++i) connect(t, g.gpus[i], g.gpus[(i + 1) % nodes], link);
  return g;
}

GeneratedNodes add_leaf_spine(Topology& t, const LeafSpineParams& p, const GpuNodeTemplate& node,
                              const std::string& prefix) {
  require(p.leaves >= 1, "leaf_spine: leaves must be >= 1");
  require(p.spines >= 1, "leaf_spine: spines must be >= 1");
  require(p.nodes_per_leaf >= 1, "leaf_spine: nodes_per_leaf must be >= 1");
  require(p.oversubscription > 0, "leaf_spine: oversubscription must be > 0");
  GeneratedNodes g;
  std::vector<NodeId> leaves, spines;
  for (int i = 0; i < p.leaves; ++i)
    leaves.push_back(t.add_switch(prefix + "leaf" + std::to_string(i)));
  for (int j = 0; j < p.spines; ++j)
    spines.push_back(t.add_switch(prefix + "spine" + std::to_string(j)));
  g.switches = leaves;
  g.switches.insert(g.switches.end(), spines.begin(), spines.end());
  int index = 0;
  for (int i = 0; i < p.leaves; ++i) {
    for (int k = 0; k < p.nodes_per_leaf; ++k) {
      g.gpus.push_back(add_gpu(t, node, prefix + "gpu" + std::to_string(index++)));
      connect(t, g.gpus.back(), leaves[i], p.host);
    }
  }
  const LinkParams up{
      BitsPerSecond{p.nodes_per_leaf * p.host.bandwidth.value / (p.spines * p.oversubscription)},
      p.uplink_latency, p.host.duplex};
  for (const NodeId l : leaves) {
    for (const NodeId s : spines) connect(t, l, s, up);
  }
  return g;
}

GeneratedNodes add_multi_site(Topology& t, const WanParams& p, const GpuNodeTemplate& node,
                              const std::string& prefix) {
  require(p.sites >= 2, "multi_site: sites must be >= 2");
  GeneratedNodes g;
  std::vector<NodeId> gateways;
  for (int s = 0; s < p.sites; ++s) {
    const std::string site = prefix + "site" + std::to_string(s) + "/";
    GeneratedNodes fabric = add_leaf_spine(t, p.site, node, site);
    const NodeId gw = t.add_switch(site + "gw");
    for (int j = 0; j < p.site.spines; ++j) {
      connect(t, *t.find_node(site + "spine" + std::to_string(j)), gw, p.gateway);
    }
    gateways.push_back(gw);
    g.gpus.insert(g.gpus.end(), fabric.gpus.begin(), fabric.gpus.end());
    g.switches.insert(g.switches.end(), fabric.switches.begin(), fabric.switches.end());
  }
  for (std::size_t a = 0; a < gateways.size(); ++a) {
    for (std::size_t b = a + 1; b < gateways.size(); ++b)
      connect(t, gateways[a], gateways[b], p.wan);
  }
  g.switches.insert(g.switches.end(), gateways.begin(), gateways.end());
  return g;
}

}  // namespace kvshift::sim
