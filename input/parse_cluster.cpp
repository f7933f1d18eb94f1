// The "cluster" section: explicit nodes and links, or one generator (star,
// ring, leaf_spine, multi_site) plus optional explicit additions (e.g. a
// storage node linked to a spine). Generators are expanded here into named
// nodes and links by sim/generators.hpp, which documents the naming.
#include <map>
#include <set>
#include <tuple>

#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"
#include "sim/generators.hpp"

namespace kvshift::input::detail {
namespace {

constexpr std::int64_t kMaxNodes = 100'000;
constexpr std::int64_t kMaxGpusPerNode = 64;

/// The "node" template of generated GPU nodes; `hbm_given`: its HBM is the template's,
/// not the GPU spec's.
sim::GpuNodeTemplate parse_template(const Reader& c, Bytes gpu_hbm, bool& hbm_given) {
  sim::GpuNodeTemplate t{"", 1, gpu_hbm, Bytes{256LL << 30}};
  hbm_given = false;
  auto r = c.object("node", false);
  if (!r) return t;
  r->allow_only(keys::kNodeTemplate);
  if (auto v = int_in(*r, "gpus", 1, kMaxGpusPerNode, false)) t.gpu_count = static_cast<int>(*v);
  if (auto v = positive_bytes(*r, "hbm", false)) {
    t.hbm_per_gpu = *v;
    hbm_given = true;
  }
  if (auto v = positive_bytes(*r, "host_memory", false)) t.host_memory = *v;
  return t;
}

void parse_node(const Reader& n, const sim::GpuNodeTemplate& t,
                std::vector<sim::ClusterNode>& out) {
  n.allow_only(keys::kNode);
  sim::ClusterNode node;
  node.name = n.string("name").value_or("");
  node.kind = enum_field<sim::NodeKind>(n, "kind",
                                        {{"gpu", sim::NodeKind::kGpu},
                                         {"switch", sim::NodeKind::kSwitch},
                                         {"storage", sim::NodeKind::kStorage}},
                                        false)
                  .value_or(sim::NodeKind::kGpu);
  node.site = n.string("site", false).value_or("");
  if (node.kind == sim::NodeKind::kGpu) {
    node.gpu_count =
        static_cast<int>(int_in(n, "gpus", 1, kMaxGpusPerNode, false).value_or(t.gpu_count));
    node.hbm_per_gpu = positive_bytes(n, "hbm", false).value_or(t.hbm_per_gpu);
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

/// Reads an explicit link; its ends are resolved against the nodes read so far (`ids`:
/// name -> index, the first node of a name). A link with an unknown or repeated end is
/// reported and left out.
void parse_link(const Reader& l, const std::map<std::string, sim::NodeId>& ids,
                std::vector<sim::ClusterLink>& out, LoadContext& ctx) {
  l.allow_only(keys::kLink);
  sim::ClusterLink link;
  const std::optional<std::string> a = l.string("a"), b = l.string("b");
  link.name = l.string("name", false).value_or(a.value_or("") + "-" + b.value_or(""));
  link.bandwidth = positive_bandwidth(l, "bandwidth", true).value_or(BitsPerSecond{});
  link.latency =
      sim::from_seconds(duration_at_least0(l, "latency", false, false).value_or(Seconds{0}));
  link.duplex =
      enum_field<sim::Duplex>(l, "duplex",
                              {{"full", sim::Duplex::kFull}, {"half", sim::Duplex::kHalf}}, false)
          .value_or(sim::Duplex::kFull);
  bool ok = true;
  for (const auto& [key, name, end] :
       {std::tuple{"a", &a, &link.a}, std::tuple{"b", &b, &link.b}}) {
    if (!*name) {
      ok = false;  // already reported
    } else if (const auto it = ids.find(**name); it != ids.end()) {
      *end = it->second;
    } else {
      std::vector<std::string> names;
      for (const auto& [n, id] : ids) names.push_back(n);
      l.problem(key, "unknown node \"" + **name + "\"" + closest_name(**name, names));
      ok = false;
    }
  }
  if (ok && *a == *b) {
    l.problem("b", "a link must join two different nodes (got \"" + *b + "\" twice)");
    ok = false;
  }
  if (!ok) return;
  out.push_back(std::move(link));
  ctx.link_pointers.push_back(l.pointer());
}

sim::LinkParams link_params(BitsPerSecond bandwidth, std::optional<Seconds> latency) {
  return {bandwidth, sim::from_seconds(latency.value_or(Seconds{0}))};
}

/// star and ring: the node count and their links.
std::optional<std::pair<int, sim::LinkParams>> parse_star_like(const Reader& g,
                                                               std::int64_t min_nodes) {
  g.allow_only(keys::kStar);
  auto n = int_in(g, "nodes", min_nodes, kMaxNodes, true);
  auto bw = positive_bandwidth(g, "bandwidth", true);
  auto lat = duration_at_least0(g, "latency", false, false);
  if (!n || !bw) return std::nullopt;
  return std::pair{static_cast<int>(*n), link_params(*bw, lat)};
}

std::optional<sim::LeafSpineParams> parse_leaf_spine(const Reader& g) {
  g.allow_only(keys::kLeafSpine);
  sim::LeafSpineParams s;
  auto leaves = int_in(g, "leaves", 1, 10'000, true);
  auto spines = int_in(g, "spines", 1, 10'000, true);
  auto per_leaf = int_in(g, "nodes_per_leaf", 1, 10'000, true);
  auto node_bw = positive_bandwidth(g, "node_bandwidth", true);
  auto up_bw = positive_bandwidth(g, "uplink_bandwidth", false);
  auto over = number_in(g, "oversubscription", 0, 1e6, true, false);
  const auto latency = duration_at_least0(g, "latency", false, false);
  const auto uplink_latency = duration_at_least0(g, "uplink_latency", false, false);
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
  s.host = link_params(*node_bw, latency);
  s.uplink_latency = uplink_latency ? sim::from_seconds(*uplink_latency) : s.host.latency;
  if (g.has("uplink_bandwidth") && !up_bw) return std::nullopt;  // reported
  // The generator takes the uplink as given (derived here, so it is computed once).
  const double down = node_bw->value * s.nodes_per_leaf;
  s.uplink_bandwidth = up_bw.value_or(BitsPerSecond{down / (over.value_or(1.0) * s.spines)});
  return s;
}

std::optional<sim::MultiSiteParams> parse_multi_site(const Reader& g) {
  g.allow_only(keys::kMultiSite);
  sim::MultiSiteParams s;
  bool ok = true;
  std::set<std::string> names;
  g.each("sites", [&](const Reader& site) {
    site.allow_only(keys::kSite);
    sim::SiteParams ss;
    ss.name = site.string("name").value_or("");
    auto n = int_in(site, "nodes", 1, kMaxNodes, true);
    auto bw = positive_bandwidth(site, "lan_bandwidth", true);
    auto lat = duration_at_least0(site, "lan_latency", false, false);
    if (!ss.name.empty() && !names.insert(ss.name).second) {
      site.problem("name", "two sites are named \"" + ss.name + "\"");
      ok = false;
    }
    if (!n || !bw || ss.name.empty()) {
      ok = false;
      return;
    }
    ss.nodes = static_cast<int>(*n);
    ss.lan = link_params(*bw, lat);
    s.sites.push_back(ss);
  });
  auto wan = positive_bandwidth(g, "wan_bandwidth", true);
  auto wan_latency = duration_at_least0(g, "wan_latency", false, false);
  if (g.node().is_object() && g.node().contains("sites") && g.node()["sites"].is_array() &&
      g.node()["sites"].size() < 2) {
    g.problem("sites",
              "expected at least 2 sites (got " + std::to_string(g.node()["sites"].size()) + ")");
    ok = false;
  }
  if (!ok || !wan) return std::nullopt;
  s.wan = link_params(*wan, wan_latency);
  return s;
}

}  // namespace

std::optional<std::uint64_t> parse_ecmp(const Reader& r) {
  if (!r.has("ecmp")) return std::nullopt;
  const Json& v = r.node()["ecmp"];
  if (v.is_boolean()) return v.get<bool>() ? std::optional<std::uint64_t>{0} : std::nullopt;
  if (!v.is_object()) {
    r.problem("ecmp", "expected true, false or {\"seed\": N} (got " + v.dump() + ")");
    return std::nullopt;
  }
  const Reader e = *r.object("ecmp");
  e.allow_only({"seed"});
  const auto seed = e.integer("seed", false);
  if (seed && *seed < 0) {
    e.problem("seed", "must be >= 0 (got " + std::to_string(*seed) + ")");
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(seed.value_or(0));
}

sim::ClusterSpec parse_cluster(const Reader& c, const cost_model::GpuSpec& gpu, LoadContext& ctx) {
  c.allow_only(keys::kCluster);
  sim::ClusterSpec out;
  out.ecmp_seed = parse_ecmp(c);
  bool template_hbm = false;
  const sim::GpuNodeTemplate tmpl = parse_template(c, gpu.hbm_capacity, template_hbm);
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
          const auto& [nodes, link] = *s;
          out.generator = g == "star" ? sim::ClusterGenerator::kStar : sim::ClusterGenerator::kRing;
          g == "star" ? sim::add_star(out, nodes, link, tmpl)
                      : sim::add_ring(out, nodes, link, tmpl);
        }
      } else if (g == "leaf_spine") {
        if (auto s = parse_leaf_spine(*r)) {
          out.generator = sim::ClusterGenerator::kLeafSpine;
          sim::add_leaf_spine(out, *s, tmpl);
        }
      } else if (auto s = parse_multi_site(*r)) {
        out.generator = sim::ClusterGenerator::kMultiSite;
        sim::add_multi_site(out, *s, tmpl);
      }
    }
  }
  ctx.generated_nodes = out.nodes.size();
  ctx.link_pointers.assign(out.links.size(), ctx.generator_pointer);
  const std::string default_hbm = template_hbm ? c.pointer() + "/node/hbm" : "/gpu";
  ctx.hbm_origin.assign(out.nodes.size(), default_hbm);
  c.each(
      "nodes",
      [&](const Reader& n) {
        parse_node(n, tmpl, out.nodes);
        ctx.hbm_origin.push_back(n.has("hbm") ? n.pointer() + "/hbm" : default_hbm);
      },
      false);
  std::map<std::string, sim::NodeId> ids;
  for (std::size_t i = 0; i < out.nodes.size(); ++i)
    ids.emplace(out.nodes[i].name, static_cast<sim::NodeId>(i));
  c.each(
      "links", [&](const Reader& l) { parse_link(l, ids, out.links, ctx); }, false);
  return out;
}

}  // namespace kvshift::input::detail
