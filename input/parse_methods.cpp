// The "risk_kv" and "proxy_kv" sections: the RISK-KV topology (a name, group
// list, topology.json path or inline object) with its measured ΔNLL, and the
// ProxyKV proxy model, its placement, retention ratio ρ and NLL change. A
// topology.json written by `kvshift calibrate` carries its held-out test-set
// quality as {"quality": {"set": "test", "delta_nll_mean": x,
// "violation_share": s}} (the mean ΔNLL and the share of test requests whose
// own ΔNLL exceeds the calibration's ε; older files say "violation_rate",
// hand-written ones may say "delta_nll"); the scenario's own "delta_nll" wins
// when both are given. A quality block from any set but the test set is not read.
// ProxyKV's NLL change is either written by hand ("delta_nll") or read from a
// quality.json of `kvshift quality` ("quality"): its proxykv rows, interpolated
// at the scenario's ρ (a ρ outside the measured ratios is refused); a file that measured
// several mappers is read for the one "quality_label" names. Each ΔNLL carries its source:
// the file it was read from with the file's digest, or "scenario constant, not measured" (a
// hand-written RISK-KV delta_nll that overrides a calibrated topology says so). ProxyKV's
// "quality" may list quality.json files run at different histories: a move is then charged
// at its own context (linear between the measured histories, the nearest outside them). A
// topology.json has one test set at one history; RISK-KV's "quality" may name quality.json
// files whose risk-kv row measured that same topology.json (by digest), one or several at
// different histories as ProxyKV's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "cost_model/quality_curve.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"
#include "input/spec_files.hpp"

namespace kvshift::input::detail {
namespace {

/// The lowest mean ΔNLL a calibration file may report (measured ones sit within ±0.01).
constexpr double kMinFileDeltaNll = -0.1;

/// The test-set quality a topology document carries, and where it was read ("" inline).
struct FileQuality {
  std::optional<double> delta_nll, violation_share;
  std::string key;                       ///< the quality key delta_nll came from
  std::optional<std::int64_t> requests;  ///< test requests behind it, where the file says
  std::string origin;                    ///< "PATH (fnv1a64:...)" of a topology.json
  std::string digest;                    ///< "fnv1a64:..." of that topology.json ("" inline)
};

std::optional<double> number_of(const Json& q, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (q.contains(k) && q[k].is_number()) return q[k].get<double>();
  }
  return {};
}

FileQuality quality_from(const Json& doc) {
  if (!doc.is_object() || !doc.contains("quality") || !doc["quality"].is_object()) return {};
  const Json& q = doc["quality"];
  if (q.contains("set") && !(q["set"].is_string() && q["set"].get<std::string>() == "test")) {
    return {};
  }
  FileQuality f{number_of(q, {"delta_nll", "delta_nll_mean", "mean_delta_nll"}),
                number_of(q, {"violation_share", "violation_rate"}), "", std::nullopt, ""};
  for (const char* k : {"delta_nll", "delta_nll_mean", "mean_delta_nll"}) {
    if (f.delta_nll && f.key.empty() && q.contains(k) && q[k].is_number()) f.key = k;
  }
  if (q.contains("requests") && q["requests"].is_number_integer()) {
    f.requests = q["requests"].get<std::int64_t>();
  }
  return f;
}

// The pointer of the first integral float too large for int64 (which parse_topology's integer
// reads must not see), or nullopt.
std::optional<std::string> huge_integer(const Json& v, const std::string& ptr) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::floor(d) && !(std::fabs(d) < 9.2e18)) return ptr;
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if (auto p = huge_integer(x, ptr + "/" + k)) return p;
    }
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (auto p = huge_integer(v[i], ptr + "/" + std::to_string(i))) return p;
    }
  }
  return std::nullopt;
}

// Parses a topology document with the shared reader; problems land under `at`.
cost_model::OmissionPlan topology_from_json(const Json& doc, const Reader& at, std::string_view key,
                                            const cost_model::ModelSpec& m,
                                            std::string_view source) {
  if (auto p = huge_integer(doc, "")) {
    at.problem(key, std::string(source) + *p + ": number out of range");
    return {};
  }
  Diagnostics local;
  cost_model::OmissionPlan t;
  try {
    t = parse_topology(Reader(doc, "", local), m);
  } catch (const InputError& e) {
    local.add("", e.what());
  }
  for (const std::string& item : local.items()) {
    at.problem(key, std::string(source) + (item.starts_with("/:") ? item.substr(1) : item));
  }
  return t;
}

void read_topology(const Reader& r, const cost_model::ModelSpec& m, sim::RiskKvSpec& s,
                   FileQuality& file_quality, LoadContext& ctx) {
  const Json& v = r.node()["topology"];
  if (v.is_object()) {
    Reader(v, r.pointer() + "/topology", r.diagnostics()).allow_only(keys::kTopology);
    s.omission = topology_from_json(v, r, "topology", m, "");
    s.topology_source = "inline";
    file_quality = quality_from(v);
    return;
  }
  const std::string text = v.get<std::string>();
  if (text.ends_with(".json")) {
    s.topology_source = resolve_path(ctx, text);
    Json doc;
    try {
      doc = read_json_file(input_file(ctx, text, false));
    } catch (const InputError& e) {
      r.problem("topology", e.what());
      return;
    } catch (const Json::exception& e) {  // read_json_file lets non-syntax JSON errors through
      r.problem("topology", s.topology_source + ": not valid JSON: " + e.what());
      return;
    }
    s.omission = topology_from_json(doc, r, "topology", m, s.topology_source + ": ");
    file_quality = quality_from(doc);
    file_quality.digest = file_digest(input_file(ctx, text, false));
    file_quality.origin = s.topology_source + " (" + file_quality.digest + ")";
    return;
  }
  s.topology_source = text;
  try {
    s.omission = cost_model::OmissionPlan::parse(text, m);
  } catch (const InputError& e) {
    std::string msg = e.what();
    for (std::string_view prefix : {"--topology: ", "topology: "}) {
      if (msg.starts_with(prefix)) msg = msg.substr(prefix.size());
    }
    r.problem("topology", msg);
  }
}

/// One quality.json's ΔNLL of a method (ProxyKV at the scenario's ρ, or a RISK-KV topology).
struct MeasuredQuality {
  std::optional<std::int64_t> history;  ///< the history it ran at, when it says
  double delta_nll = 0;
  std::string source;  ///< file (digest): label (mapper) how (requests, budget)
  std::optional<double> over_eps_share;
  double eps = 0;
};

/// Reads `name` (a quality.json of `kvshift quality`) for its proxykv rows labelled `label`;
/// problems about the file go to `problem`, about ρ to r's "retention".
/// A quality.json written by `kvshift quality`, or nothing (`problem` told why).
std::optional<Json> read_quality_doc(LoadContext& ctx, const std::string& name,
                                     const std::string& path,
                                     const std::function<void(std::string)>& problem) {
  Json doc;
  try {
    doc = read_json_file(input_file(ctx, name, false));
  } catch (const InputError& e) {
    problem(e.what());
    return std::nullopt;
  } catch (const Json::exception& e) {
    problem(path + ": not valid JSON: " + e.what());
    return std::nullopt;
  }
  if (!doc.is_object() || doc.value("format", "") != "kvshift-quality" || !doc.contains("rows") ||
      !doc["rows"].is_array()) {
    problem(path + ": not a quality.json written by `kvshift quality`");
    return std::nullopt;
  }
  return doc;
}

/// A quality.json's ProxyKV rows: ΔNLL and the share over ε by ρ (of `label`'s mapper, when
/// given), every mapper label measured, and the policy behind `label`.
struct ProxyRows {
  std::vector<cost_model::QualityPoint> points, shares;  // shares: over-ε share by ρ
  double eps = 0;
  std::string policy;
  std::set<std::string> labels;  // one per ProxyKV policy (mapper) measured
};

ProxyRows proxy_rows(const Json& doc, const std::optional<std::string>& label) {
  ProxyRows out;
  for (const Json& row : doc["rows"]) {
    if (row.is_object() && row.value("method", "") == "proxykv" && row.contains("retention") &&
        row["retention"].is_number() && row.contains("delta_nll_mean") &&
        row["delta_nll_mean"].is_number()) {
      out.labels.insert(row.value("label", "proxykv"));
      if (label && row.value("label", "proxykv") != *label) continue;
      out.points.push_back({row["retention"].get<double>(), row["delta_nll_mean"].get<double>()});
      if (label && row.contains("policy") && row["policy"].is_string()) {
        out.policy = row["policy"].get<std::string>();  // names the mapper behind the label
      }
      const Json& over = row.contains("over_eps") ? row["over_eps"] : Json();
      if (over.is_object() && over.contains("share") && over["share"].is_number() &&
          over.contains("eps") && over["eps"].is_number()) {
        out.shares.push_back({row["retention"].get<double>(), over["share"].get<double>()});
        out.eps = over["eps"].get<double>();
      }
    }
  }
  return out;
}

std::optional<MeasuredQuality> read_proxy_quality_file(
    const Reader& r, const std::string& name, const std::optional<std::string>& label,
    double retention, const std::function<void(std::string)>& problem, LoadContext& ctx) {
  const std::string path = resolve_path(ctx, name);
  const std::optional<Json> read = read_quality_doc(ctx, name, path, problem);
  if (!read) return std::nullopt;
  const Json& doc = *read;
  const ProxyRows rows = proxy_rows(doc, label);
  const std::vector<cost_model::QualityPoint>& points = rows.points;
  const std::set<std::string>& labels = rows.labels;
  std::string list;
  for (const auto& l : labels) list += (list.empty() ? "" : ", ") + l;
  if (labels.empty()) {
    problem(path + ": holds no proxykv rows (measure prune:proxykv:MAPPER)");
    return std::nullopt;
  }
  if (label && points.empty()) {
    r.problem("quality_label",
              "\"" + *label + "\" is not a ProxyKV label of " + path + " (it has " + list + ")");
    return std::nullopt;
  }
  if (labels.size() > 1 && !label) {
    problem(path + ": holds " + std::to_string(labels.size()) + " ProxyKV mappers (" + list +
            "); a scenario charges one: name it in quality_label, or measure the mapper it uses "
            "alone");
    return std::nullopt;
  }
  const auto q = cost_model::interpolate_quality(points, retention);
  if (!q) {
    double lo = points.front().retention, hi = lo;
    for (const auto& p : points) lo = std::min(lo, p.retention), hi = std::max(hi, p.retention);
    r.problem("retention", format_g(retention) + " is outside the ratios " + path +
                               " measured ProxyKV at [" + format_g(lo) + ", " + format_g(hi) +
                               "]; measure it there or pick ρ inside");
    return std::nullopt;
  }
  // Charged as measured, like a topology's test-set mean (a small negative mean is noise).
  MeasuredQuality m;
  m.delta_nll = q->delta_nll;
  m.source = path + " (" + file_digest(input_file(ctx, name, false)) +
             "): " + (label ? *label : std::string("proxykv")) +
             (rows.policy.empty() ? "" : " (" + rows.policy + ")") + " " + q->how + " (mean over " +
             std::to_string(doc.value("requests", 0)) + " requests, " +
             doc.value("budget", std::string("per-head")) + " budget)";
  if (doc.contains("history") && doc["history"].is_number_integer()) {
    m.history = doc["history"].get<std::int64_t>();
  }
  // The share of its requests over ε at ρ, where every row says (interpolated like the mean).
  if (rows.shares.size() == points.size()) {
    if (const auto share = cost_model::interpolate_quality(rows.shares, retention)) {
      m.over_eps_share = share->delta_nll;
      m.eps = rows.eps;
    }
  }
  return m;
}

/// What a "quality" entry measured: one quality.json, or several run at different histories,
/// which charge each move at its own context (between the measured histories; the nearest
/// outside them).
struct QualityByContext {
  MeasuredQuality first;                               ///< the file's, or the shortest history's
  std::vector<cost_model::ContextQuality> by_context;  ///< empty for one file
  std::string source;
};

/// Reads one quality.json of the entry; problems about the file go to `problem`.
using ReadQualityFile = std::function<std::optional<MeasuredQuality>(
    const std::string& name, const std::function<void(std::string)>& problem)>;

/// r's "quality" (which must be there), each file read by `read`.
std::optional<QualityByContext> read_quality_entry(const Reader& r, const ReadQualityFile& read) {
  const Json& v = r.node()["quality"];
  if (v.is_string()) {
    auto m = read(v.get<std::string>(), [&](std::string msg) { r.problem("quality", msg); });
    if (!m) return std::nullopt;
    QualityByContext q{*m, {}, m->source};
    if (m->history) {
      q.source +=
          " at " + std::to_string(*m->history) + " history tokens, whatever a move's context";
    }
    return q;
  }
  if (!v.is_array() || v.size() < 2) {
    r.problem("quality",
              "expected a quality.json, or a list of two or more run at different histories "
              "(got " +
                  v.dump() + ")");
    return std::nullopt;
  }
  std::vector<std::pair<std::int64_t, MeasuredQuality>> measured;
  bool ok = true;
  r.each("quality", [&](const Reader& e) {
    if (!e.node().is_string()) {
      e.problem("expected a file name (got " + e.node().dump() + ")");
      ok = false;
      return;
    }
    const auto m =
        read(e.node().get<std::string>(), [&](std::string msg) { e.problem(std::move(msg)); });
    if (!m) {
      ok = false;
    } else if (!m->history) {
      e.problem("the file does not say which history it ran at (\"history\")");
      ok = false;
    } else {
      for (const auto& [h, other] : measured) {
        if (h == *m->history) {
          e.problem("two files measured at " + std::to_string(h) + " history tokens");
          ok = false;
        }
      }
      measured.emplace_back(*m->history, *m);
    }
  });
  if (!ok) return std::nullopt;
  std::sort(measured.begin(), measured.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  QualityByContext q{measured.front().second, {}, {}};
  std::string histories;
  for (const auto& [h, m] : measured) {
    q.by_context.push_back({h, m.delta_nll});
    histories += (histories.empty() ? "" : ", ") + std::to_string(h);
  }
  q.source = q.first.source + " and " + std::to_string(measured.size() - 1) +
             " more file(s): measured at " + histories +
             " history tokens; each move is charged at its own context (linear "
             "between them, the nearest outside; the figure given here is at " +
             std::to_string(measured.front().first) + ")";
  return q;
}

/// proxy_kv.quality: the ΔNLL `kvshift quality` measured for ProxyKV at the scenario's ρ.
void read_measured_proxy_quality(const Reader& r, sim::ProxyKvSpec& s, LoadContext& ctx) {
  if (!r.has("quality")) return;
  const auto label = r.string("quality_label", false);
  const auto q = read_quality_entry(r, [&](const std::string& name, const auto& problem) {
    return read_proxy_quality_file(r, name, label, s.retention, problem, ctx);
  });
  if (!q) return;
  s.delta_nll = q->first.delta_nll;
  s.delta_nll_source = q->source;
  s.delta_nll_by_context = q->by_context;
  // The share over ε is the shortest history's: the files' shares are not merged.
  s.over_eps_share = q->first.over_eps_share;
  s.eps = q->first.eps;
}

/// One quality.json's risk-kv row for the scenario's topology.json (`topology`, by its
/// digest); a row of another topology, or one that does not say which, is refused.
std::optional<MeasuredQuality> read_risk_quality_file(
    const std::string& name, const FileQuality& topology,
    const std::function<void(std::string)>& problem, LoadContext& ctx) {
  const std::string path = resolve_path(ctx, name);
  const std::optional<Json> read = read_quality_doc(ctx, name, path, problem);
  if (!read) return std::nullopt;
  const Json& doc = *read;
  std::string others;
  for (const Json& row : doc["rows"]) {
    if (!row.is_object() || row.value("method", "") != "risk-kv") continue;
    const Json& t = row.contains("topology") ? row["topology"] : Json();
    if (!t.is_object() || !t.contains("digest") || !t["digest"].is_string()) {
      problem(path +
              ": its risk-kv row does not say which topology it measured (a file of an "
              "older kvshift quality: measure it again)");
      return std::nullopt;
    }
    const std::string digest = t["digest"].get<std::string>();
    if (digest != topology.digest) {
      others += (others.empty() ? "" : ", ") + row.value("policy", std::string("risk-kv")) + " (" +
                digest + ")";
      continue;
    }
    if (!row.contains("delta_nll_mean") || !row["delta_nll_mean"].is_number()) {
      problem(path + ": its risk-kv row has no delta_nll_mean");
      return std::nullopt;
    }
    MeasuredQuality m;
    m.delta_nll = row["delta_nll_mean"].get<double>();
    if (!(m.delta_nll >= kMinFileDeltaNll && m.delta_nll <= 100)) {
      problem(path + ": its risk-kv delta_nll_mean must be in [-0.1, 100] nats/token (got " +
              format_g(m.delta_nll) + ")");
      return std::nullopt;
    }
    // The CI goes with the mean: a rebuild's ΔNLL is often within noise of 0, either side.
    const Json& ci = row.contains("delta_nll_ci95") ? row["delta_nll_ci95"] : Json();
    const bool has_ci = ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number();
    m.source = path + " (" + file_digest(input_file(ctx, name, false)) + "): risk-kv (mean over " +
               std::to_string(doc.value("requests", 0)) + " requests of " +
               std::to_string(doc.value("eval", 0)) + " eval tokens" +
               (has_ci ? ", 95 % CI [" + format_g(ci[0].get<double>()) + ", " +
                             format_g(ci[1].get<double>()) + "]"
                       : std::string()) +
               ")";
    if (doc.contains("history") && doc["history"].is_number_integer()) {
      m.history = doc["history"].get<std::int64_t>();
    }
    const Json& over = row.contains("over_eps") ? row["over_eps"] : Json();
    if (over.is_object() && over.contains("share") && over["share"].is_number() &&
        over.contains("eps") && over["eps"].is_number()) {
      m.over_eps_share = over["share"].get<double>();
      m.eps = over["eps"].get<double>();
    }
    return m;
  }
  problem(path + (others.empty()
                      ? ": holds no risk-kv rows (measure --policy "
                        "risk-kv:TOPOLOGY.json)"
                      : ": measured RISK-KV on another topology than risk_kv.topology (" +
                            topology.origin + "): " + others));
  return std::nullopt;
}

// Where RISK-KV's ΔNLL comes from: the scenario's own delta_nll (`hand_written`), which
// may override the topology's, or the topology's quality block.
std::string delta_nll_source(const FileQuality& f, bool hand_written) {
  const std::string what =
      "quality." + f.key +
      (f.requests ? " over " + std::to_string(*f.requests) + " test requests" : std::string());
  const std::string file =
      f.origin.empty() ? "the inline topology's " + what : f.origin + ": " + what;
  if (hand_written) {
    return "scenario constant, not measured (risk_kv.delta_nll written by hand" +
           (f.delta_nll ? "; it overrides " + format_g(*f.delta_nll) + ", " + file : "") + ")";
  }
  if (f.origin.empty()) return "scenario constant, not measured (" + file + ")";
  return file;
}

}  // namespace

std::optional<sim::RiskKvSpec> parse_risk_kv(const Reader& top, const cost_model::ModelSpec& m,
                                             bool model_ok, LoadContext& ctx) {
  auto r = top.object("risk_kv", false);
  if (!r) return std::nullopt;
  r->allow_only(keys::kRiskKv);
  sim::RiskKvSpec s;
  if (auto d = r->string("predictor_dtype", false)) {
    try {
      s.predictor_dtype = cost_model::parse_dtype(*d, "predictor_dtype");
    } catch (const InputError& e) {
      r->problem("predictor_dtype", std::string(e.what()).substr(17));
    }
  }
  FileQuality file_quality;
  if (!r->has("topology")) {
    r->problem("topology", "is required");
  } else if (!r->node()["topology"].is_string() && !r->node()["topology"].is_object()) {
    r->problem("topology",
               "expected \"paper\", \"G2,G5\", a topology.json path or an object (got " +
                   got(*r, "topology") + ")");
  } else if (model_ok) {
    read_topology(*r, m, s, file_quality, ctx);
    if (r->diagnostics().empty() && s.omission.empty()) {
      r->problem("topology", "omits no layer group (\"" + s.topology_source +
                                 "\"); RISK-KV needs at least one");
    }
  }
  // A calibration's numbers are checked like the scenario's own: a mean ΔNLL far below zero
  // (a rebuild cannot beat the exact KV by more than noise) or beyond 100 nats/token, or a
  // share outside [0, 1], is a broken file, never clamped.
  if (file_quality.delta_nll &&
      !(*file_quality.delta_nll >= kMinFileDeltaNll && *file_quality.delta_nll <= 100)) {
    r->problem("topology", s.topology_source +
                               ": quality.delta_nll_mean must be in [-0.1, 100] nats/token (got " +
                               format_g(*file_quality.delta_nll) + ")");
  }
  if (file_quality.violation_share &&
      !(*file_quality.violation_share >= 0.0 && *file_quality.violation_share <= 1.0)) {
    r->problem("topology", s.topology_source + ": quality.violation_share must be in [0, 1] (got " +
                               format_g(*file_quality.violation_share) + ")");
  }
  s.violation_share = file_quality.violation_share;
  auto nll = number_in(*r, "delta_nll", 0, 100, false, false);
  if (r->has("quality") && r->has("delta_nll")) {
    r->problem("quality",
               "give either measured quality.json files or a hand-written delta_nll, not both");
  } else if (r->has("quality")) {
    if (!model_ok || !r->diagnostics().empty()) return s;  // the topology's problem is told
    if (file_quality.digest.empty()) {
      r->problem("quality",
                 "charges the topology a quality.json measured: risk_kv.topology must "
                 "be that topology.json (got \"" +
                     s.topology_source + "\")");
      return s;
    }
    const auto q = read_quality_entry(*r, [&](const std::string& name, const auto& problem) {
      return read_risk_quality_file(name, file_quality, problem, ctx);
    });
    if (q) {
      s.delta_nll = q->first.delta_nll;
      s.delta_nll_source = q->source;
      s.delta_nll_by_context = q->by_context;
    }
  } else if (nll) {
    s.delta_nll = *nll;
    s.delta_nll_source = delta_nll_source(file_quality, true);
  } else if (file_quality.delta_nll) {
    s.delta_nll = *file_quality.delta_nll;
    s.delta_nll_source = delta_nll_source(file_quality, false);
  } else if (!r->has("delta_nll")) {
    r->problem("delta_nll",
               "is required (the topology's measured ΔNLL in nats/token; or put "
               "{\"quality\": {\"delta_nll\": x}} in its topology.json)");
  }
  return s;
}

std::optional<sim::ProxyKvSpec> parse_proxy_kv(const Reader& top, LoadContext& ctx) {
  auto r = top.object("proxy_kv", false);
  if (!r) return std::nullopt;
  r->allow_only(keys::kProxyKv);
  sim::ProxyKvSpec s;
  if (auto name = r->string("proxy_model")) {
    try {
      const bool path = name->find('/') != std::string::npos || name->ends_with(".json");
      s.proxy_model =
          path ? resolve_costed_model(input_file(ctx, *name, true)) : cost_model::find_model(*name);
    } catch (const InputError& e) {
      std::string msg = e.what();
      if (msg.starts_with("--model: ")) msg = msg.substr(9);
      r->problem("proxy_model", msg);
    } catch (const Json::exception& e) {
      r->problem("proxy_model", std::string("not valid JSON: ") + e.what());
    }
  }
  s.placement =
      enum_field<sim::ProxyPlacement>(*r, "placement",
                                      {{"target_stream", sim::ProxyPlacement::kTargetStream},
                                       {"proxy_gpu", sim::ProxyPlacement::kProxyGpu}},
                                      false)
          .value_or(sim::ProxyPlacement::kTargetStream);
  s.retention = number_in(*r, "retention", 0, 1, true, true).value_or(0.5);
  if (r->has("quality") && r->has("delta_nll")) {
    r->problem("quality",
               "give either a measured quality.json or a hand-written delta_nll, "
               "not both");
  } else if (r->has("quality")) {
    read_measured_proxy_quality(*r, s, ctx);
  } else if (r->has("quality_label")) {
    r->problem("quality_label", "picks a mapper's rows of a quality.json: give quality too");
  } else if (!r->has("delta_nll")) {
    r->problem("delta_nll",
               "is required (the NLL change at ρ in nats/token), or name a "
               "quality.json written by `kvshift quality` in \"quality\"");
  } else {
    s.delta_nll = number_in(*r, "delta_nll", 0, 100, false, true).value_or(0);
    s.delta_nll_source = "scenario constant, not measured (proxy_kv.delta_nll written by hand)";
  }
  return s;
}

}  // namespace kvshift::input::detail
