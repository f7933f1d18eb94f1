// The "cluster" section: explicit nodes and links, or one generator (star,
// ring, leaf_spine, multi_site) plus optional explicit additions (e.g. a
// storage node linked to a spine). Generators are expanded here into named
// nodes and links; cluster_generators.cpp documents the naming.
#include "scenarios/scenario_keys.hpp"
#include "scenarios/scenario_parts.hpp"

namespace kvshift::scenarios::detail {
namespace {

constexpr std::int64_t kMaxNodes = 100'000;
constexpr std::int64_t kMaxGpusPerNode = 64;

sim::NodeTemplate parse_template(const Reader& c) {
  sim::NodeTemplate t;
  auto r = c.object("node", false);
  if (!r) return t;
  r->allow_only(keys::kNodeTemplate);
  if (auto v = int_in(*r, "gpus", 1, kMaxGpusPerNode, false)) t.gpus = static_cast<int>(*v);
  if (auto v = positive_bytes(*r, "hbm", false)) t.hbm_per_gpu = *v;
  if (auto v = positive_bytes(*r, "host_memory", false)) t.host_memory = *v;
  return t;
}

void parse_node(const Reader& n, const sim::NodeTemplate& t, Bytes gpu_hbm,
                std::vector<sim::NodeSpec>& out) {
  n.allow_only(keys::kNode);
  sim::NodeSpec node;
  node.name = n.string("name").value_or("");
  node.kind = enum_field<sim::NodeKind>(n, "kind",
                                        {{"gpu", sim::NodeKind::kGpu},
                                         {"switch", sim::NodeKind::kSwitch},
                                         {"storage", sim::NodeKind::kStorage}},
                                        false)
                  .value_or(sim::NodeKind::kGpu);
  node.site = n.string("site", false).value_or("");
  if (node.kind == sim::NodeKind::kGpu) {
    node.gpus = static_cast<int>(int_in(n, "gpus", 1, kMaxGpusPerNode, false).value_or(t.gpus));
    node.hbm_per_gpu = positive_bytes(n, "hbm", false).value_or(t.hbm_per_gpu.value_or(gpu_hbm));
    node.host_memory = positive_bytes(n, "host_memory", false).value_or(t.host_memory);
    if (n.has("capacity")) n.problem("capacity", "applies only to kind \"storage\"");
  } else {
    for (std::string_view k : {"gpus", "hbm", "host_memory"}) {
      if (n.has(k)) n.problem(k, "applies only to kind \"gpu\"");
    }
    if (node.kind == sim::NodeKind::kStorage) {
      node.host_memory = positive_bytes(n, "capacity", true).value_or(Bytes{});
    } else if (n.has("capacity")) {
      n.problem("capacity", "applies only to kind \"storage\"");
    }
  }
  out.push_back(std::move(node));
}

void parse_link(const Reader& l, std::vector<sim::LinkSpec>& out) {
  l.allow_only(keys::kLink);
  sim::LinkSpec link;
  link.a = l.string("a").value_or("");
  link.b = l.string("b").value_or("");
  link.name = l.string("name", false).value_or(link.a + "-" + link.b);
  link.bandwidth = positive_bandwidth(l, "bandwidth", true).value_or(BitsPerSecond{});
  link.latency = duration_at_least0(l, "latency", false, false).value_or(Seconds{0});
  link.duplex =
      enum_field<sim::Duplex>(l, "duplex",
                              {{"full", sim::Duplex::kFull}, {"half", sim::Duplex::kHalf}}, false)
          .value_or(sim::Duplex::kFull);
  out.push_back(std::move(link));
}

std::optional<sim::StarSpec> parse_star_like(const Reader& g, std::int64_t min_nodes) {
  g.allow_only(keys::kStar);
  auto n = int_in(g, "nodes", min_nodes, kMaxNodes, true);
  auto bw = positive_bandwidth(g, "bandwidth", true);
  auto lat = duration_at_least0(g, "latency", false, false);
  if (!n || !bw) return std::nullopt;
  return sim::StarSpec{static_cast<int>(*n), *bw, lat.value_or(Seconds{0})};
}

std::optional<sim::LeafSpineSpec> parse_leaf_spine(const Reader& g) {
  g.allow_only(keys::kLeafSpine);
  sim::LeafSpineSpec s;
  auto leaves = int_in(g, "leaves", 1, 10'000, true);
  auto spines = int_in(g, "spines", 1, 10'000, true);
  auto per_leaf = int_in(g, "nodes_per_leaf", 1, 10'000, true);
  auto node_bw = positive_bandwidth(g, "node_bandwidth", true);
  auto up_bw = positive_bandwidth(g, "uplink_bandwidth", false);
  auto over = number_in(g, "oversubscription", 0, 1e6, true, false);
  s.latency = duration_at_least0(g, "latency", false, false).value_or(Seconds{0});
  if (g.has("uplink_bandwidth") && g.has("oversubscription")) {
    g.problem("oversubscription",
              "give either uplink_bandwidth or oversubscription, not both (the other is derived)");
    return std::nullopt;
  }
  if (!leaves || !spines || !per_leaf || !node_bw) return std::nullopt;
  if (*leaves * *per_leaf > kMaxNodes) {
    g.problem("nodes_per_leaf", "leaves × nodes_per_leaf must be <= " + std::to_string(kMaxNodes) +
                                    " (got " + std::to_string(*leaves * *per_leaf) + ")");
    return std::nullopt;
  }
  s.leaves = static_cast<int>(*leaves);
  s.spines = static_cast<int>(*spines);
  s.nodes_per_leaf = static_cast<int>(*per_leaf);
  s.node_bandwidth = *node_bw;
  const double down = s.node_bandwidth.value * s.nodes_per_leaf;
  if (up_bw) {
    s.uplink_bandwidth = *up_bw;
    s.oversubscription = down / (up_bw->value * s.spines);
  } else if (g.has("uplink_bandwidth")) {
    return std::nullopt;
  } else {
    s.oversubscription = over.value_or(1.0);
    s.uplink_bandwidth = {down / (s.oversubscription * s.spines)};
  }
  return s;
}

std::optional<sim::MultiSiteSpec> parse_multi_site(const Reader& g) {
  g.allow_only(keys::kMultiSite);
  sim::MultiSiteSpec s;
  bool ok = true;
  g.each("sites", [&](const Reader& site) {
    site.allow_only(keys::kSite);
    sim::SiteSpec ss;
    ss.name = site.string("name").value_or("");
    auto n = int_in(site, "nodes", 1, kMaxNodes, true);
    auto bw = positive_bandwidth(site, "lan_bandwidth", true);
    ss.lan_latency = duration_at_least0(site, "lan_latency", false, false).value_or(Seconds{0});
    if (!n || !bw || ss.name.empty()) {
      ok = false;
      return;
    }
    ss.nodes = static_cast<int>(*n);
    ss.lan_bandwidth = *bw;
    s.sites.push_back(ss);
  });
  auto wan = positive_bandwidth(g, "wan_bandwidth", true);
  s.wan_latency = duration_at_least0(g, "wan_latency", false, false).value_or(Seconds{0});
  if (g.node().is_object() && g.node().contains("sites") && g.node()["sites"].is_array() &&
      g.node()["sites"].size() < 2) {
    g.problem("sites",
              "expected at least 2 sites (got " + std::to_string(g.node()["sites"].size()) + ")");
    ok = false;
  }
  if (!ok || !wan) return std::nullopt;
  s.wan_bandwidth = *wan;
  return s;
}

}  // namespace

sim::ClusterSpec parse_cluster(const Reader& c, const cost_model::GpuSpec& gpu, LoadContext& ctx) {
  c.allow_only(keys::kCluster);
  sim::ClusterSpec out;
  out.node_template = parse_template(c);
  const Bytes hbm = out.node_template.hbm_per_gpu.value_or(gpu.hbm_capacity);
  std::vector<std::string> generators;
  for (std::string_view k : {"star", "ring", "leaf_spine", "multi_site"}) {
    if (c.has(k)) generators.emplace_back(k);
  }
  if (generators.size() > 1) {
    c.problem(generators[1],
              "only one generator per cluster (already have \"" + generators[0] + "\")");
  }
  if (generators.empty() && !c.has("nodes")) {
    c.problem(
        "expected \"nodes\" and \"links\", or a generator: star, ring, leaf_spine, "
        "multi_site");
  }
  if (!generators.empty()) {
    ctx.generator_pointer = c.pointer() + "/" + generators[0];
    const std::string& g = generators[0];
    if (auto r = c.object(g)) {
      if (g == "star" || g == "ring") {
        if (auto s = parse_star_like(*r, g == "ring" ? 3 : 1)) {
          if (g == "star") {
            out.generator = sim::ClusterGenerator::kStar;
            out.star = sim::StarSpec{*s};
            expand_star(*s, out.node_template, hbm, out);
          } else {
            out.generator = sim::ClusterGenerator::kRing;
            out.ring = sim::RingSpec{s->nodes, s->bandwidth, s->latency};
            expand_ring(*out.ring, out.node_template, hbm, out);
          }
        }
      } else if (g == "leaf_spine") {
        if (auto s = parse_leaf_spine(*r)) {
          out.generator = sim::ClusterGenerator::kLeafSpine;
          out.leaf_spine = *s;
          expand_leaf_spine(*s, out.node_template, hbm, out);
        }
      } else if (auto s = parse_multi_site(*r)) {
        out.generator = sim::ClusterGenerator::kMultiSite;
        out.multi_site = *s;
        expand_multi_site(*s, out.node_template, hbm, out);
      }
    }
  }
  ctx.generated_nodes = out.nodes.size();
  ctx.generated_links = out.links.size();
  const std::string default_hbm =
      out.node_template.hbm_per_gpu ? c.pointer() + "/node/hbm" : "/gpu";
  ctx.hbm_origin.assign(out.nodes.size(), default_hbm);
  c.each(
      "nodes",
      [&](const Reader& n) {
        parse_node(n, out.node_template, hbm, out.nodes);
        ctx.hbm_origin.push_back(n.has("hbm") ? n.pointer() + "/hbm" : default_hbm);
      },
      false);
  c.each(
      "links", [&](const Reader& l) { parse_link(l, out.links); }, false);
  return out;
}

}  // namespace kvshift::scenarios::detail
