// Flows file reader (see flows_file.hpp) and the plain network run behind `kvshift flows`.
#include "input/flows_file.hpp"

#include <map>

#include "cost_model/input_error.hpp"
#include "input/json_stream.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input {
namespace {

using sim::NodeId;

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::optional<NodeId> node_ref(const Reader& r, std::string_view key, const sim::Topology& t) {
  const auto name = r.string(key);
  if (!name) return std::nullopt;
  if (auto id = t.find_node(*name)) return id;
  std::vector<std::string> names;
  for (NodeId n = 0; n < t.node_count(); ++n) names.push_back(t.node(n).name);
  r.problem(key, "unknown node " + in_quotes(*name) + detail::closest_name(*name, names));
  return std::nullopt;
}

sim::SimTime time_of(const std::optional<Seconds>& s) {
  return s ? sim::from_seconds(*s) : sim::SimTime{};
}

void read_transfer(const Reader& r, FlowsFile& f, std::map<std::string, std::string>& ids) {
  r.allow_only({"id", "src", "dst", "bytes", "start", "route", "max_rate"});
  const sim::Topology& t = f.topology;
  const auto id = r.string("id");
  const auto src = node_ref(r, "src", t);
  const auto dst = node_ref(r, "dst", t);
  const auto bytes = r.bytes("bytes");
  const auto start = r.duration("start", false);
  const auto max_rate = detail::positive_bandwidth(r, "max_rate", false);
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

/// Everything but the transfers: root checks, "ecmp" and the "cluster" section, read as a
/// scenario's. Returns false when the transfers cannot be read (no object, no cluster).
bool read_topology(const Reader& root, FlowsFile& f) {
  if (!root.node().is_object()) {
    root.problem("expected a JSON object with a cluster and transfers");
    return false;
  }
  root.allow_only({"cluster", "transfers", "ecmp"});
  read_ecmp(root, f);
  const auto c = root.object("cluster");
  if (!c) return false;
  Diagnostics& d = root.diagnostics();
  const std::size_t before = d.items().size();
  detail::LoadContext ctx;
  const sim::ClusterSpec cluster = detail::parse_cluster(*c, cost_model::GpuSpec{}, ctx);
  detail::check_cluster_names(cluster, d, ctx);
  if (d.items().size() == before) {
    f.topology = sim::Topology(cluster);
    return true;
  }
  // Already an input error: keep what is sound (each name's first node, the links that
  // join two of them) so the transfers are checked too and every problem is reported.
  std::vector<std::optional<NodeId>> id(cluster.nodes.size());
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    if (!f.topology.find_node(cluster.nodes[i].name)) id[i] = f.topology.add_node(cluster.nodes[i]);
  }
  for (sim::ClusterLink l : cluster.links) {
    if (!id[l.a] || !id[l.b] || !(l.bandwidth.value > 0) || f.topology.find_link(l.name)) continue;
    l.a = *id[l.a];
    l.b = *id[l.b];
    f.topology.add_link(std::move(l));
  }
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

}  // namespace kvshift::input
