// Cost table reader/writer; see cost_table.hpp.
#include "input/cost_table.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "cost_model/input_error.hpp"

namespace kvshift::input {
namespace {

constexpr double kMaxSeconds = 1e6;
constexpr std::string_view kOps[] = {"prefill",     "decode", "reconstruct",
                                     "proxy_score", "prune",  "predictor_load"};

std::optional<cost_model::CostTableEntry> parse_entry(const Reader& r) {
  r.allow_only({"op", "tokens", "sharing", "batch", "median_s", "p10_s", "p90_s", "repeats"});
  cost_model::CostTableEntry e;
  const auto op = r.string("op");
  const auto tokens = r.integer("tokens");
  const auto sharing = r.integer("sharing");
  const auto batch = r.integer("batch", false).value_or(1);
  const auto median = r.number("median_s");
  const auto p10 = r.number("p10_s");
  const auto p90 = r.number("p90_s");
  const auto repeats = r.integer("repeats");
  bool ok = op && tokens && sharing && median && p10 && p90 && repeats;
  if (op && std::find(std::begin(kOps), std::end(kOps), *op) == std::end(kOps)) {
    r.problem("op",
              "must be prefill, decode, reconstruct, proxy_score, prune or predictor_load "
              "(got \"" +
                  *op + "\")");
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
  positive_int("batch", std::optional<std::int64_t>(batch));
  if (op && *op != "decode" && batch != 1) {
    r.problem("batch", "applies to decode rows only");
    ok = false;
  }
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
  e.batch = batch;
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

void parse_inputs(const Reader& r, CostTable& t) {
  r.allow_only({"weights", "model", "proxy", "predictors", "mapper"});
  if (auto w = r.string("weights", false)) {
    if (*w != "real" && *w != "seeded random")
      r.problem("weights", "must be \"real\" or \"seeded random\" (got \"" + *w + "\")");
    t.weights = *w;
  }
  for (const char* key : {"model", "proxy", "predictors", "mapper"}) {
    if (auto f = r.object(key, false)) {
      f->allow_only({"path", "digest"});
      t.inputs[key] = {f->string("path").value_or(""), f->string("digest").value_or("")};
    }
  }
}

}  // namespace

bool table_has(const CostTable& table, std::string_view op) {
  return std::any_of(table.entries.begin(), table.entries.end(),
                     [&](const auto& e) { return e.op == op; });
}

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
  r.allow_only({"backend", "model", "topology", "proxy", "retention", "machine", "inputs", "notes",
                "entries"});
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
  if (auto in = r.object("inputs", false)) parse_inputs(*in, t);
  if (auto n = r.object("notes", false)) {
    for (const auto& [op, text] : n->node().items()) {
      if (std::find(std::begin(kOps), std::end(kOps), op) == std::end(kOps)) {
        n->problem(op, "is not an op of a cost table");
      } else if (!text.is_string()) {
        n->problem(op, "must be a string");
      } else {
        t.notes[op] = text.get<std::string>();
      }
    }
  }
  std::set<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>> seen;
  if (r.has("entries") && doc["entries"].is_array() && doc["entries"].empty()) {
    r.problem("entries", "must hold at least one measurement");
  }
  r.each("entries", [&](const Reader& er) {
    if (auto e = parse_entry(er)) {
      if (!seen.insert({e->op, e->tokens, e->sharing, e->batch}).second) {
        er.problem("duplicate entry for op " + e->op + ", tokens " + std::to_string(e->tokens) +
                   ", sharing " + std::to_string(e->sharing) + ", batch " +
                   std::to_string(e->batch));
      } else {
        t.entries.push_back(*e);
      }
    }
  });
  if (!t.topology.empty() && t.topology != "none") {
    if (!table_has(t, "reconstruct")) r.problem("topology", "given but no reconstruct entries");
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
    Json row = {
        {"op", e.op},       {"tokens", e.tokens}, {"sharing", e.sharing}, {"median_s", e.median_s},
        {"p10_s", e.p10_s}, {"p90_s", e.p90_s},   {"repeats", e.repeats}};
    if (e.op == "decode") row["batch"] = e.batch;
    entries.push_back(std::move(row));
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
  if (!t.weights.empty() || !t.inputs.empty()) {
    Json in = Json::object();
    if (!t.weights.empty()) in["weights"] = t.weights;
    for (const auto& [key, f] : t.inputs) in[key] = {{"path", f.path}, {"digest", f.digest}};
    j["inputs"] = in;
  }
  if (!t.notes.empty()) j["notes"] = t.notes;
  return j;
}

cost_model::TableCosts make_table_costs(const CostTable& t, const std::string& path,
                                        const cost_model::ComputeCosts* fallback) {
  const std::string device = t.backend == "cuda" ? t.machine.gpu : t.machine.cpu;
  cost_model::TableInfo info{t.model,
                             t.topology_groups(),
                             t.proxy,
                             t.retention,
                             path + " (" + t.backend + ": " + device +
                                 (t.weights == "seeded random" ? "; seeded random weights" : "") +
                                 ")",
                             t.notes};
  return cost_model::TableCosts(std::move(info), t.entries, fallback);
}

}  // namespace kvshift::input
