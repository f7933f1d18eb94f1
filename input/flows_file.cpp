// Flows file reader (see flows_file.hpp) and the plain network run behind `kvshift flows`.
#include "input/flows_file.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

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

/// Transfer id -> position in the file's array of its first transfer, 8 bytes a slot: an
/// open-addressing table of (accepted transfer, position) that reads the ids from the
/// accepted transfers themselves; the ids of rejected ones (the file fails anyway) in a map.
class IdIndex {
 public:
  explicit IdIndex(const std::vector<FlowTransfer>& accepted) : accepted_(accepted) {}
  /// Room for `n` accepted transfers without growing.
  void reserve(std::size_t n) {
    if (2 * n > slots_.size()) rebuild(std::bit_ceil(std::max<std::size_t>(16, 2 * n)));
  }
  std::optional<std::size_t> find(const std::string& id) const {
    if (auto it = rejected_.find(id); it != rejected_.end()) return it->second;
    if (slots_.empty()) return std::nullopt;
    for (std::size_t i = hash(id); slots_[i].index != kEmpty; i = (i + 1) & mask()) {
      if (accepted_[slots_[i].index].id == id) return slots_[i].position;
    }
    return std::nullopt;
  }
  /// The last accepted transfer, at `position` (its id not seen before).
  void add_accepted(std::size_t position) {
    if (2 * (used_ + 1) > slots_.size()) rebuild(std::max<std::size_t>(16, 2 * slots_.size()));
    insert(
        {static_cast<std::uint32_t>(accepted_.size() - 1), static_cast<std::uint32_t>(position)});
    ++used_;
  }
  void add_rejected(const std::string& id, std::size_t position) {
    rejected_.emplace(id, position);
  }

 private:
  static constexpr std::uint32_t kEmpty = ~std::uint32_t{0};
  struct Slot {
    std::uint32_t index = kEmpty;  ///< into the accepted transfers
    std::uint32_t position = 0;
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t hash(std::string_view id) const { return std::hash<std::string_view>{}(id)&mask(); }
  void insert(Slot s) {
    std::size_t i = hash(accepted_[s.index].id);
    while (slots_[i].index != kEmpty) i = (i + 1) & mask();
    slots_[i] = s;
  }
  void rebuild(std::size_t size) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(size, Slot{});
    for (const Slot& s : old) {
      if (s.index != kEmpty) insert(s);
    }
  }

  const std::vector<FlowTransfer>& accepted_;
  std::vector<Slot> slots_;
  std::size_t used_ = 0;
  std::unordered_map<std::string, std::size_t> rejected_;
};

/// Whether the ends are known and joined (by the explicit route when there is one); a
/// problem is reported when they are known but not joined.
bool accept_transfer(const Reader& r, const sim::Topology& t, std::optional<NodeId> src,
                     std::optional<NodeId> dst,
                     const std::optional<std::vector<sim::LinkId>>& route) {
  if (!src || !dst) return false;
  if (route) {
    try {
      t.make_route(*src, *dst, *route);
    } catch (const InputError& e) {
      r.problem("route", e.what());
      return false;
    }
  } else if (!t.route(*src, *dst)) {
    r.problem("no route from " + in_quotes(t.node(*src).name) + " to " +
              in_quotes(t.node(*dst).name) + ": the nodes are not connected");
    return false;
  }
  return true;
}

void read_transfer(const Reader& r, FlowsFile& f, IdIndex& ids, std::size_t position) {
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
  const std::optional<std::size_t> first = id ? ids.find(*id) : std::nullopt;
  if (first) {
    r.problem("id", "duplicate transfer id " + in_quotes(*id) + " (first at /transfers/" +
                        std::to_string(*first) + ")");
  }
  if (!id || !bytes || !accept_transfer(r, t, src, dst, route)) {
    if (id && !first) ids.add_rejected(*id, position);
    return;
  }
  f.transfers.push_back({*id, *src, *dst, *bytes, time_of(start), std::move(route), max_rate});
  if (!first) ids.add_accepted(position);
}

}  // namespace

namespace {

/// Everything but the transfers: root checks, "ecmp" and the "cluster" section, read as a
/// scenario's. Returns false when the transfers cannot be read (no object, no cluster).
bool read_topology(const Reader& root, FlowsFile& f) {
  if (!root.node().is_object()) {
    root.problem("expected a JSON object with a cluster and transfers");
    return false;
  }
  root.allow_only({"cluster", "transfers", "ecmp"});
  f.ecmp_seed = detail::parse_ecmp(root);
  const auto c = root.object("cluster");
  if (!c) return false;
  Diagnostics& d = root.diagnostics();
  const std::size_t before = d.items().size();
  detail::LoadContext ctx;
  const sim::ClusterSpec cluster = detail::parse_cluster(*c, cost_model::GpuSpec{}, ctx);
  // "ecmp" as a scenario's cluster says it, or beside the cluster: one of the two.
  if (cluster.ecmp_seed && root.has("ecmp")) {
    root.problem("ecmp", "given twice: here and in /cluster/ecmp (keep one)");
  } else if (cluster.ecmp_seed) {
    f.ecmp_seed = cluster.ecmp_seed;
  }
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
  IdIndex ids(f.transfers);
  std::size_t position = 0;
  root.each("transfers", [&](const Reader& r) { read_transfer(r, f, ids, position++); });
  diag.throw_if_any(source);
  return f;
}

FlowsFile load_flows_file(const std::string& path) {
  // Two passes: the topology (the document without the transfers' elements), then the
  // transfers one at a time, so no DOM of the whole file is ever held.
  std::size_t count = 0;
  const Json skeleton = read_json_skeleton(path, "transfers", &count);
  Diagnostics diag;
  const Reader root(skeleton, "", diag);
  FlowsFile f;
  if (!read_topology(root, f)) diag.throw_if_any(path);
  IdIndex ids(f.transfers);
  f.transfers.reserve(count);  // exactly: no doubling of the largest array
  ids.reserve(count);
  // A transfers value that is not an array stays in the skeleton and is reported here.
  root.each("transfers", [&](const Reader& r) { read_transfer(r, f, ids, 0); });
  if (skeleton.contains("transfers") && skeleton["transfers"].is_array()) {
    stream_json_array(path, "transfers", [&](const Json& t, std::size_t i) {
      read_transfer(Reader(t, "/transfers/" + std::to_string(i), diag), f, ids, i);
    });
  }
  diag.throw_if_any(path);
  return f;
}

namespace {

/// Books each transfer's end into FlowResults (the network forgets ended transfers).
class EndRecorder : public sim::NetworkObserver {
 public:
  explicit EndRecorder(FlowResults& r) : r_(r) {}
  void on_done(const sim::TransferInfo& info) override {
    r_.finish[info.id] = info.finish;
    r_.state[info.id] = info.state;
    if (info.state != sim::TransferState::kFinished) r_.reasons[info.id] = info.reason;
  }

 private:
  FlowResults& r_;
};

/// `s` as a JSON string (quoted; escaped as nlohmann does when it needs to be).
void append_json_string(std::string& out, const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    return c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20 &&
           static_cast<unsigned char>(c) < 0x7f;
  });
  if (!plain) {
    out += nlohmann::json(s).dump();
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

sim::TransferRequest request_of(const FlowTransfer& t) {
  sim::TransferRequest r;
  r.src = t.src;
  r.dst = t.dst;
  r.size = t.bytes;
  r.start = t.start;
  r.route = t.route;
  r.rate_cap = t.max_rate;
  return r;
}

}  // namespace

FlowResults run_flows(FlowsFile& flows) {
  sim::Simulator simulator;
  sim::NetworkOptions options;
  options.record_utilisation = false;
  options.keep_ended = false;
  options.ecmp = flows.ecmp_seed.has_value();
  options.ecmp_seed = flows.ecmp_seed.value_or(0);
  sim::Network network(simulator, flows.topology, options);
  const std::vector<FlowTransfer>& t = flows.transfers;
  const std::size_t n = t.size();
  FlowResults out;
  out.finish.assign(n, sim::SimTime{});
  out.state.assign(n, sim::TransferState::kPending);
  EndRecorder recorder(out);
  network.add_observer(&recorder);
  // Transfer i is handed over at the earliest start among i..n-1 (its own start when the
  // file is in start order), so ids follow the input and a start is never in the past.
  std::vector<sim::SimTime> due(n);
  for (std::size_t i = n; i-- > 0;)
    due[i] = i + 1 < n ? std::min(t[i].start, due[i + 1]) : t[i].start;
  std::size_t next = 0;
  std::function<void()> feed = [&] {
    while (next < n && due[next] <= simulator.now()) network.submit(request_of(t[next++]));
    if (next < n) simulator.schedule_at(due[next], [&feed] { feed(); });
  };
  if (n > 0) simulator.schedule_at(due[0], [&feed] { feed(); });
  simulator.run();
  // A transfer that never ended (stalled for good) is still held by the network.
  for (std::size_t i = 0; i < n; ++i) {
    if (out.state[i] != sim::TransferState::kPending) continue;
    const sim::TransferInfo& info = network.info(static_cast<sim::TransferId>(i));
    out.state[i] = info.state;
    out.finish[i] = info.finish;
    out.reasons[i] = info.reason;
  }
  return out;
}

void write_flow_lines(const FlowsFile& flows, const FlowResults& results,
                      const std::function<void(std::string_view)>& sink) {
  constexpr std::size_t kChunk = 64 * 1024;
  std::string text;
  text.reserve(kChunk + 256);
  for (std::size_t i = 0; i < flows.transfers.size(); ++i) {
    text += "{\"id\": ";
    append_json_string(text, flows.transfers[i].id);
    text += ", \"finish_s\": ";
    if (results.state[i] == sim::TransferState::kFinished) {
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, results.finish[i].seconds());
      text.append(buf, r.ptr);
      text += "}\n";
    } else {
      const auto reason = results.reasons.find(i);
      text += "null, \"state\": \"";
      text += sim::to_string(results.state[i]);
      text += "\", \"reason\": ";
      append_json_string(text, reason == results.reasons.end() ? "" : reason->second);
      text += "}\n";
    }
    if (text.size() >= kChunk) {
      sink(text);
      text.clear();
    }
  }
  if (!text.empty()) sink(text);
}

std::vector<FlowOutcome> simulate_flows(FlowsFile& flows) {
  const FlowResults r = run_flows(flows);
  std::vector<FlowOutcome> out;
  out.reserve(flows.transfers.size());
  for (std::size_t i = 0; i < flows.transfers.size(); ++i) {
    const auto reason = r.reasons.find(i);
    out.push_back({flows.transfers[i].id, r.state[i], r.finish[i],
                   reason == r.reasons.end() ? std::string() : reason->second});
  }
  return out;
}

}  // namespace kvshift::input
