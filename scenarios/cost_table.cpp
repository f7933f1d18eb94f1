// Cost table reader/writer; see cost_table.hpp.
#include "scenarios/cost_table.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "cost_model/input_error.hpp"

namespace kvshift::scenarios {
namespace {

constexpr double kMaxSeconds = 1e6;
constexpr std::string_view kOps[] = {"prefill", "reconstruct", "proxy_score", "prune"};

std::optional<cost_model::CostTableEntry> parse_entry(const Reader& r) {
  r.allow_only({"op", "tokens", "sharing", "median_s", "p10_s", "p90_s", "repeats"});
  cost_model::CostTableEntry e;
  const auto op = r.string("op");
  const auto tokens = r.integer("tokens");
  const auto sharing = r.integer("sharing");
  const auto median = r.number("median_s");
  const auto p10 = r.number("p10_s");
  const auto p90 = r.number("p90_s");
  const auto repeats = r.integer("repeats");
  bool ok = op && tokens && sharing && median && p10 && p90 && repeats;
  if (op && std::find(std::begin(kOps), std::end(kOps), *op) == std::end(kOps)) {
    r.problem("op", "must be prefill, reconstruct, proxy_score or prune (got \"" + *op + "\")");
    ok = false;
  }
  auto positive_int = [&](std::string_view key, const std::optional<std::int64_t>& v) {
    if (v && (*v <= 0 || *v > (std::int64_t{1} << 40))) {
      r.problem(key, "must be a positive integer (got " + std::to_string(*v) + ")");
      ok = false;
    }
  };
  positive_int("tokens", tokens);
  positive_int("sharing", sharing);
  positive_int("repeats", repeats);
  for (const auto& [key, v] : {std::pair{"median_s", median}, {"p10_s", p10}, {"p90_s", p90}}) {
    if (v && !(*v > 0 && *v <= kMaxSeconds)) {
      r.problem(key, "must be a number of seconds in (0, 1e6]");
      ok = false;
    }
  }
  if (ok && !(*p10 <= *median && *median <= *p90)) {
    r.problem("needs p10_s <= median_s <= p90_s");
    ok = false;
  }
  if (!ok) return std::nullopt;
  e.op = *op;
  e.tokens = *tokens;
  e.sharing = *sharing;
  e.median_s = *median;
  e.p10_s = *p10;
  e.p90_s = *p90;
  e.repeats = static_cast<int>(std::min<std::int64_t>(*repeats, 1 << 30));
  return e;
}

MachineInfo parse_machine(const Reader& r) {
  r.allow_only({"cpu", "gpu", "versions", "date"});
  MachineInfo m;
  m.cpu = r.string("cpu").value_or("");
  m.gpu = r.string("gpu").value_or("");
  m.date = r.string("date").value_or("");
  if (auto v = r.object("versions")) {
    for (const auto& [key, value] : v->node().items()) {
      if (value.is_string()) {
        m.versions[key] = value.get<std::string>();
      } else {
        v->problem(key, "must be a string");
      }
    }
  }
  return m;
}

}  // namespace

int CostTable::topology_groups() const {
  if (topology.empty() || topology == "none") return 0;
  return static_cast<int>(std::count(topology.begin(), topology.end(), ',')) + 1;
}

CostTable parse_cost_table(const Json& doc, std::string_view source) {
  Diagnostics diag;
  CostTable t;
  if (!doc.is_object()) {
    diag.add("", "a cost table must be a JSON object");
    diag.throw_if_any(source);
  }
  const Reader r(doc, "", diag);
  r.allow_only({"backend", "model", "topology", "proxy", "retention", "machine", "entries"});
  if (auto b = r.string("backend")) {
    if (*b != "cpu" && *b != "cuda")
      r.problem("backend", "must be \"cpu\" or \"cuda\" (got \"" + *b + "\")");
    t.backend = *b;
  }
  t.model = r.string("model").value_or("");
  if (t.model.empty() && r.has("model")) r.problem("model", "must not be empty");
  t.topology = r.string("topology", false).value_or("");
  if (r.has("proxy") && !doc["proxy"].is_null()) t.proxy = r.string("proxy");
  if (auto rho = r.number("retention", false)) {
    if (!(*rho > 0 && *rho <= 1)) r.problem("retention", "must be in (0, 1]");
    t.retention = *rho;
  }
  if (auto m = r.object("machine")) t.machine = parse_machine(*m);
  std::set<std::tuple<std::string, std::int64_t, std::int64_t>> seen;
  if (r.has("entries") && doc["entries"].is_array() && doc["entries"].empty()) {
    r.problem("entries", "must hold at least one measurement");
  }
  r.each("entries", [&](const Reader& er) {
    if (auto e = parse_entry(er)) {
      if (!seen.insert({e->op, e->tokens, e->sharing}).second) {
        er.problem("duplicate entry for op " + e->op + ", tokens " + std::to_string(e->tokens) +
                   ", sharing " + std::to_string(e->sharing));
      } else {
        t.entries.push_back(*e);
      }
    }
  });
  if (!t.topology.empty() && t.topology != "none") {
    const bool has_recon = std::any_of(t.entries.begin(), t.entries.end(),
                                       [](const auto& e) { return e.op == "reconstruct"; });
    if (!has_recon) r.problem("topology", "given but no reconstruct entries");
  }
  diag.throw_if_any(source);
  return t;
}

CostTable parse_cost_table_text(std::string_view text, std::string_view source) {
  Json doc;
  try {
    doc = parse_json_text(text, source);
  } catch (const Json::exception& e) {  // e.g. a number outside double's range
    throw InputError(std::string(source) + ": not a valid JSON document (" + e.what() + ")");
  }
  return parse_cost_table(doc, source);
}

CostTable read_cost_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read the cost table");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cost_table_text(text.str(), path);
}

Json cost_table_json(const CostTable& t) {
  Json entries = Json::array();
  for (const auto& e : t.entries) {
    entries.push_back({{"op", e.op},
                       {"tokens", e.tokens},
                       {"sharing", e.sharing},
                       {"median_s", e.median_s},
                       {"p10_s", e.p10_s},
                       {"p90_s", e.p90_s},
                       {"repeats", e.repeats}});
  }
  Json j = {{"backend", t.backend},
            {"model", t.model},
            {"machine",
             {{"cpu", t.machine.cpu},
              {"gpu", t.machine.gpu},
              {"versions", t.machine.versions},
              {"date", t.machine.date}}},
            {"entries", entries}};
  if (!t.topology.empty()) j["topology"] = t.topology;
  if (t.proxy) j["proxy"] = *t.proxy;
  if (t.retention) j["retention"] = *t.retention;
  return j;
}

cost_model::TableCosts make_table_costs(const CostTable& t,
                                        const cost_model::ComputeCosts* fallback) {
  return cost_model::TableCosts(t.model, t.topology_groups(), t.entries, fallback);
}

}  // namespace kvshift::scenarios
