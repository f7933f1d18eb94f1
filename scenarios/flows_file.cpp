// Flows file reader (see flows_file.hpp) and the plain network run behind `kvshift flows`.
#include "scenarios/flows_file.hpp"

#include <map>

#include "cost_model/input_error.hpp"
#include "scenarios/json_stream.hpp"
#include "sim/generators.hpp"

namespace kvshift::scenarios {
namespace {

using sim::NodeId;

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

void read_node(const Reader& r, sim::Topology& t) {
  sim::ClusterNode n;
  n.kind = sim::NodeType::kGpu;
  if (r.node().is_string()) {
    n.name = r.node().get<std::string>();
  } else if (r.node().is_object()) {
    r.allow_only({"name", "kind"});
    n.name = r.string("name").value_or("");
    if (auto kind = r.string("kind", false)) {
      if (*kind == "switch") {
        n.kind = sim::NodeType::kSwitch;
      } else if (*kind == "storage") {
        n.kind = sim::NodeType::kStorage;
      } else if (*kind != "gpu") {
        r.problem("kind", "must be gpu, switch or storage (got " + in_quotes(*kind) + ")");
      }
    }
  } else {
    r.problem("expected a node name or {\"name\": ..., \"kind\": ...}");
    return;
  }
  if (n.name.empty()) {
    r.problem("node name must not be empty");
  } else if (t.find_node(n.name)) {
    r.problem("duplicate node " + in_quotes(n.name));
  } else {
    t.add_node(std::move(n));
  }
}

std::optional<NodeId> node_ref(const Reader& r, std::string_view key, const sim::Topology& t) {
  const auto name = r.string(key);
  if (!name) return std::nullopt;
  if (auto id = t.find_node(*name)) return id;
  r.problem(key, "unknown node " + in_quotes(*name));
  return std::nullopt;
}

std::optional<BitsPerSecond> positive_bandwidth(const Reader& r, std::string_view key,
                                                bool required = true) {
  const auto bw = r.bandwidth(key, required);
  if (bw && !(bw->value > 0)) {
    r.problem(key, "must be > 0 (got " + r.node()[std::string(key)].dump() + ")");
    return std::nullopt;
  }
  return bw;
}

sim::SimTime time_of(const std::optional<Seconds>& s) {
  return s ? sim::from_seconds(*s) : sim::SimTime{};
}

void read_link(const Reader& r, sim::Topology& t) {
  r.allow_only({"id", "src", "dst", "bandwidth", "latency", "duplex"});
  const auto id = r.string("id", false);
  const auto a = node_ref(r, "src", t);
  const auto b = node_ref(r, "dst", t);
  const auto bw = positive_bandwidth(r, "bandwidth");
  const auto latency = r.duration("latency", false);
  sim::LinkDuplex duplex = sim::LinkDuplex::kFull;
  if (auto d = r.string("duplex", false)) {
    if (*d == "half") {
      duplex = sim::LinkDuplex::kHalf;
    } else if (*d != "full") {
      r.problem("duplex", "must be full or half (got " + in_quotes(*d) + ")");
    }
  }
  if (id && t.find_link(*id)) {
    r.problem("id", "duplicate link id " + in_quotes(*id));
    return;
  }
  if (a && b && *a == *b) {
    r.problem("dst",
              "a link needs two different nodes (both are " + in_quotes(t.node(*a).name) + ")");
    return;
  }
  if (!a || !b || !bw) return;
  t.add_link(sim::ClusterLink{id.value_or(""), *a, *b, *bw, time_of(latency), duplex});
}

int count(const Reader& r, std::string_view key, int minimum) {
  const auto v = r.integer(key);
  if (v && *v < minimum) {
    r.problem(key, "must be >= " + std::to_string(minimum) + " (got " + std::to_string(*v) + ")");
    return minimum;
  }
  return v ? static_cast<int>(*v) : minimum;
}

sim::LeafSpineParams leaf_spine_params(const Reader& r) {
  sim::LeafSpineParams p;
  p.leaves = count(r, "leaves", 1);
  p.spines = count(r, "spines", 1);
  p.nodes_per_leaf = count(r, "nodes_per_leaf", 1);
  p.host.bandwidth = positive_bandwidth(r, "bandwidth").value_or(BitsPerSecond{1});
  p.host.latency = time_of(r.duration("latency", false));
  p.uplink_latency =
      r.has("uplink_latency") ? time_of(r.duration("uplink_latency")) : p.host.latency;
  if (auto o = r.number("oversubscription", false)) {
    if (*o > 0) {
      p.oversubscription = *o;
    } else {
      r.problem("oversubscription", "must be > 0 (got " + std::to_string(*o) + ")");
    }
  }
  return p;
}

void read_generator(const Reader& r, sim::Topology& t) {
  const auto kind = r.string("kind");
  if (!kind) return;
  const Diagnostics& d = r.diagnostics();
  const std::size_t before = d.items().size();
  if (*kind == "star" || *kind == "ring") {
    r.allow_only({"kind", "nodes", "bandwidth", "latency"});
    const int nodes = count(r, "nodes", *kind == "ring" ? 3 : 1);
    const sim::LinkParams link{positive_bandwidth(r, "bandwidth").value_or(BitsPerSecond{1}),
                               time_of(r.duration("latency", false))};
    if (d.items().size() != before) return;
    *kind == "star" ? sim::add_star(t, nodes, link) : sim::add_ring(t, nodes, link);
  } else if (*kind == "leaf_spine") {
    r.allow_only({"kind", "leaves", "spines", "nodes_per_leaf", "bandwidth", "latency",
                  "uplink_latency", "oversubscription"});
    const sim::LeafSpineParams p = leaf_spine_params(r);
    if (d.items().size() == before) sim::add_leaf_spine(t, p);
  } else if (*kind == "multi_site") {
    r.allow_only({"kind", "sites", "leaves", "spines", "nodes_per_leaf", "bandwidth", "latency",
                  "uplink_latency", "oversubscription", "wan_bandwidth", "wan_latency"});
    sim::WanParams w;
    w.sites = count(r, "sites", 2);
    w.site = leaf_spine_params(r);
    w.wan.bandwidth = positive_bandwidth(r, "wan_bandwidth").value_or(BitsPerSecond{1});
    w.wan.latency = time_of(r.duration("wan_latency"));
    w.gateway =
        sim::LinkParams{BitsPerSecond{w.site.host.bandwidth.value * w.site.nodes_per_leaf *
                                      w.site.leaves / (w.site.spines * w.site.oversubscription)},
                        w.site.uplink_latency};
    if (d.items().size() == before) sim::add_multi_site(t, w);
  } else {
    r.problem("kind",
              "must be star, ring, leaf_spine or multi_site (got " + in_quotes(*kind) + ")");
  }
}

void read_transfer(const Reader& r, FlowsFile& f, std::map<std::string, std::string>& ids) {
  r.allow_only({"id", "src", "dst", "bytes", "start", "route", "max_rate"});
  const sim::Topology& t = f.topology;
  const auto id = r.string("id");
  const auto src = node_ref(r, "src", t);
  const auto dst = node_ref(r, "dst", t);
  const auto bytes = r.bytes("bytes");
  const auto start = r.duration("start", false);
  const auto max_rate = positive_bandwidth(r, "max_rate", false);
  std::optional<std::vector<sim::LinkId>> route;
  if (r.has("route")) {
    route.emplace();
    r.each("route", [&](const Reader& hop) {
      if (!hop.node().is_string()) {
        hop.problem("expected a link id (got " + hop.node().dump() + ")");
      } else if (auto l = t.find_link(hop.node().get<std::string>())) {
        route->push_back(*l);
      } else {
        hop.problem("unknown link " + in_quotes(hop.node().get<std::string>()));
      }
    });
  }
  if (id) {
    if (auto [it, fresh] = ids.emplace(*id, r.pointer()); !fresh) {
      r.problem("id", "duplicate transfer id " + in_quotes(*id) + " (first at " + it->second + ")");
    }
  }
  if (!id || !src || !dst || !bytes) return;
  if (route) {
    try {
      t.make_route(*src, *dst, *route);
    } catch (const InputError& e) {
      r.problem("route", e.what());
      return;
    }
  } else if (!t.route(*src, *dst)) {
    r.problem("no route from " + in_quotes(t.node(*src).name) + " to " +
              in_quotes(t.node(*dst).name) + ": the nodes are not connected");
    return;
  }
  f.transfers.push_back({*id, *src, *dst, *bytes, time_of(start), route, max_rate});
}

}  // namespace

namespace {

/// "ecmp": true | false | {"seed": N} (N >= 0; true means seed 0).
void read_ecmp(const Reader& root, FlowsFile& f) {
  if (!root.has("ecmp")) return;
  const Json& v = root.node()["ecmp"];
  if (v.is_boolean()) {
    if (v.get<bool>()) f.ecmp_seed = 0;
  } else if (v.is_object()) {
    const Reader r = *root.object("ecmp");
    r.allow_only({"seed"});
    const auto seed = r.integer("seed", false);
    if (seed && *seed < 0) {
      r.problem("seed", "must be >= 0 (got " + std::to_string(*seed) + ")");
    } else {
      f.ecmp_seed = static_cast<std::uint64_t>(seed.value_or(0));
    }
  } else {
    root.problem("ecmp", "expected true, false or {\"seed\": N} (got " + v.dump() + ")");
  }
}

/// Everything but the transfers: root checks, generator, nodes, links. Returns false when
/// the document is not an object (nothing else can be read).
bool read_topology(const Reader& root, FlowsFile& f) {
  if (!root.node().is_object()) {
    root.problem("expected a JSON object with nodes, links and transfers");
    return false;
  }
  root.allow_only({"nodes", "generator", "links", "transfers", "ecmp"});
  read_ecmp(root, f);
  const bool generated = root.has("generator");
  if (auto g = root.object("generator", false)) read_generator(*g, f.topology);
  root.each(
      "nodes", [&](const Reader& r) { read_node(r, f.topology); }, !generated);
  root.each(
      "links", [&](const Reader& r) { read_link(r, f.topology); }, !generated);
  return true;
}

}  // namespace

FlowsFile parse_flows(const Json& doc, std::string_view source) {
  Diagnostics diag;
  const Reader root(doc, "", diag);
  FlowsFile f;
  if (!read_topology(root, f)) diag.throw_if_any(source);
  std::map<std::string, std::string> ids;
  root.each("transfers", [&](const Reader& r) { read_transfer(r, f, ids); });
  diag.throw_if_any(source);
  return f;
}

FlowsFile load_flows_file(const std::string& path) {
  // Two passes: the topology (the document without the transfers' elements), then the
  // transfers one at a time, so no DOM of the whole file is ever held.
  const Json skeleton = read_json_skeleton(path, "transfers");
  Diagnostics diag;
  const Reader root(skeleton, "", diag);
  FlowsFile f;
  if (!read_topology(root, f)) diag.throw_if_any(path);
  std::map<std::string, std::string> ids;
  // A transfers value that is not an array stays in the skeleton and is reported here.
  root.each("transfers", [&](const Reader& r) { read_transfer(r, f, ids); });
  if (skeleton.contains("transfers") && skeleton["transfers"].is_array()) {
    stream_json_array(path, "transfers", [&](const Json& t, std::size_t i) {
      read_transfer(Reader(t, "/transfers/" + std::to_string(i), diag), f, ids);
    });
  }
  diag.throw_if_any(path);
  return f;
}

std::vector<FlowOutcome> simulate_flows(FlowsFile& flows) {
  sim::Simulator simulator;
  sim::NetworkOptions options;
  options.record_utilisation = false;
  options.ecmp = flows.ecmp_seed.has_value();
  options.ecmp_seed = flows.ecmp_seed.value_or(0);
  sim::Network network(simulator, flows.topology, options);
  for (const FlowTransfer& t : flows.transfers) {
    sim::TransferRequest r;
    r.src = t.src;
    r.dst = t.dst;
    r.size = t.bytes;
    r.start = t.start;
    r.route = t.route;
    r.rate_cap = t.max_rate;
    network.submit(std::move(r));
  }
  simulator.run();
  std::vector<FlowOutcome> out;
  for (std::size_t i = 0; i < flows.transfers.size(); ++i) {
    const sim::TransferInfo& info = network.info(static_cast<sim::TransferId>(i));
    out.push_back({flows.transfers[i].id, info.state, info.finish, info.reason});
  }
  return out;
}

}  // namespace kvshift::scenarios
