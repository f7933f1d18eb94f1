// Scenario sections other than cluster, workload and the two methods: model,
// GPU, KV protection, events, policies, predictors, cost source, SLO, outputs.
#include <algorithm>
#include <array>
#include <filesystem>

#include "cost_model/input_error.hpp"
#include "input/cost_table.hpp"
#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"
#include "input/spec_files.hpp"

namespace kvshift::input::detail {
namespace {

/// Strips a leading "field: " or "--field: " that cost_model messages carry.
std::string bare(const InputError& e) {
  std::string m = e.what();
  const auto colon = m.find(": ");
  if (colon != std::string::npos && m.find(' ') > colon) return m.substr(colon + 2);
  return m;
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".json");
}

/// The names a scenario may give a strategy: the cost model's, in its order.
constexpr auto kStrategyNames = [] {
  std::array<std::pair<std::string_view, sim::Strategy>, std::size(cost_model::kAllStrategies)> t;
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = {cost_model::strategy_name(cost_model::kAllStrategies[i]),
            cost_model::kAllStrategies[i]};
  }
  return t;
}();

}  // namespace

cost_model::ModelSpec parse_model(const Reader& top, LoadContext& ctx) {
  if (top.has("model") && top.node()["model"].is_string()) {
    const std::string s = top.node()["model"].get<std::string>();
    try {
      return looks_like_path(s) ? resolve_costed_model(input_file(ctx, s, true))
                                : cost_model::find_model(s);
    } catch (const InputError& e) {
      top.problem("model", looks_like_path(s) ? std::string(e.what()) : bare(e));
      return {};
    } catch (const Json::exception& e) {  // read_json_file lets non-syntax JSON errors through
      top.problem("model", std::string("not valid JSON: ") + e.what());
      return {};
    }
  }
  auto r = top.object("model");
  if (!r) return {};
  r->allow_only(keys::kModel);
  cost_model::ModelSpec m;
  if (auto base = r->string("base", false)) {
    try {
      m = cost_model::find_model(*base);
    } catch (const InputError& e) {
      r->problem("base", bare(e));
    }
  }
  const bool full = !r->has("base");
  if (auto v = r->string("name", full)) m.name = *v;
  auto count = [&](std::string_view key, int& field) {
    if (auto v = int_in(*r, key, 1, 10'000'000, full)) field = static_cast<int>(*v);
  };
  count("layers", m.layers);
  count("hidden", m.hidden);
  count("q_heads", m.q_heads);
  count("kv_heads", m.kv_heads);
  count("head_dim", m.head_dim);
  count("intermediate", m.intermediate);
  count("vocab", m.vocab);
  if (auto v = number_in(*r, "rope_theta", 0, 1e12, true, false)) m.rope_theta = *v;
  if (auto v = r->boolean("attention_bias", false)) m.attention_bias = *v;
  if (auto v = r->boolean("tied_embeddings", false)) m.tied_embeddings = *v;
  for (auto [key, field] :
       {std::pair<std::string_view, cost_model::DType*>{"kv_dtype", &m.kv_dtype},
        {"weight_dtype", &m.weight_dtype}}) {
    if (auto v = r->string(key, false)) {
      try {
        *field = cost_model::parse_dtype(*v, key);
      } catch (const InputError& e) {
        r->problem(key, bare(e));
      }
    }
  }
  if (r->diagnostics().empty()) {
    try {
      cost_model::validate(m);
    } catch (const InputError& e) {
      r->problem(e.what());
    }
  }
  return m;
}

cost_model::GpuSpec parse_gpu(const Reader& top, LoadContext& ctx) {
  if (top.has("gpu") && top.node()["gpu"].is_string()) {
    const std::string s = top.node()["gpu"].get<std::string>();
    try {
      return looks_like_path(s) ? resolve_gpu(input_file(ctx, s, false)) : cost_model::find_gpu(s);
    } catch (const InputError& e) {
      top.problem("gpu", looks_like_path(s) ? std::string(e.what()) : bare(e));
      return {};
    } catch (const Json::exception& e) {
      top.problem("gpu", std::string("not valid JSON: ") + e.what());
      return {};
    }
  }
  auto r = top.object("gpu");
  if (!r) return {};
  const std::size_t before = r->diagnostics().items().size();
  cost_model::GpuSpec g = parse_gpu_spec(*r);
  if (r->diagnostics().items().size() == before) {
    try {
      cost_model::validate(g);
    } catch (const InputError& e) {
      r->problem(e.what());
    }
  }
  return g;
}

sim::ProtectionSpec parse_protection(const Reader& r) {
  r.allow_only(keys::kProtection);
  sim::ProtectionSpec p;
  p.mode = enum_field<sim::ProtectionMode>(r, "mode",
                                           {{"none", sim::ProtectionMode::kNone},
                                            {"full", sim::ProtectionMode::kFull},
                                            {"risk_kv", sim::ProtectionMode::kRiskKv},
                                            {"proxy_kv", sim::ProtectionMode::kProxyKv}},
                                           true)
               .value_or(sim::ProtectionMode::kNone);
  p.placement =
      enum_field<sim::ReplicaPlacement>(r, "placement",
                                        {{"next_node", sim::ReplicaPlacement::kNextNode},
                                         {"least_loaded", sim::ReplicaPlacement::kLeastLoaded},
                                         {"storage", sim::ReplicaPlacement::kStorage},
                                         {"local", sim::ReplicaPlacement::kLocal}},
                                        false)
          .value_or(sim::ReplicaPlacement::kNextNode);
  if (p.placement == sim::ReplicaPlacement::kStorage) {
    p.store = r.string("store", true).value_or("");
  } else if (r.has("store")) {
    r.problem("store", "applies only to placement \"storage\"");
  }
  p.stream_every_tokens =
      int_in(r, "stream_every_tokens", 1, 1'000'000, false).value_or(p.stream_every_tokens);
  if (p.mode == sim::ProtectionMode::kNone) {
    for (std::string_view k : {"placement", "store", "stream_every_tokens"}) {
      if (r.has(k)) r.problem(k, "does not apply to mode \"none\" (nothing is replicated)");
    }
  }
  return p;
}

sim::PolicySpec parse_policies(const Reader& r) {
  r.allow_only(keys::kPolicies);
  sim::PolicySpec p;
  if (r.has("strategies")) {
    r.each("strategies", [&](const Reader& e) {
      Json wrapper = {{"strategy", e.node()}};
      Diagnostics local;
      Reader w(wrapper, "", local);
      auto s = enum_field<sim::Strategy>(w, "strategy", kStrategyNames, true);
      for (const std::string& item : local.items()) {
        e.problem(item.substr(item.find(": ") + 2));
      }
      if (!s) return;
      if (std::find(p.strategies.begin(), p.strategies.end(), *s) != p.strategies.end()) {
        e.problem(std::string("duplicate strategy \"") + sim::strategy_name(*s) + "\"");
        return;
      }
      p.strategies.push_back(*s);
    });
    if (r.node()["strategies"].is_array() && r.node()["strategies"].empty()) {
      r.problem("strategies", "expected at least one strategy");
    }
  } else {
    p.strategies = {sim::Strategy::kFullKv, sim::Strategy::kTokenReplay};
  }
  p.router = parse_router(r, false).value_or(sim::Router::kLeastLoaded);
  p.quality_budget = number_in(r, "quality_budget", 0, 100, false, false);
  if (auto rb = r.object("rebalance", false)) {
    rb->allow_only(keys::kRebalance);
    p.rebalance.enabled = true;
    p.rebalance.threshold = number_in(*rb, "threshold", 0, 1, true, false).value_or(0.9);
    p.rebalance.check_interval =
        duration_at_least0(*rb, "check_interval", true, false).value_or(Seconds{1.0});
  }
  return p;
}

sim::PredictorSpec parse_predictors(const Reader& r) {
  r.allow_only(keys::kPredictors);
  sim::PredictorSpec p;
  p.placement =
      enum_field<sim::PredictorPlacement>(r, "placement",
                                          {{"preloaded", sim::PredictorPlacement::kPreloaded},
                                           {"on_demand", sim::PredictorPlacement::kOnDemand}},
                                          false)
          .value_or(sim::PredictorPlacement::kPreloaded);
  const bool on_demand = p.placement == sim::PredictorPlacement::kOnDemand;
  if (on_demand) {
    p.hbm_budget = positive_bytes(r, "hbm_budget", false);
    p.source = r.string("source", true).value_or("");
  } else {
    for (std::string_view k : {"hbm_budget", "source"}) {
      if (r.has(k)) r.problem(k, "applies only to placement \"on_demand\"");
    }
  }
  p.batch_reconstruction = r.boolean("batch_reconstruction", false).value_or(true);
  return p;
}

/// The ops a scenario's simulation asks its cost source for.
std::vector<std::string> ops_needed(const ScenarioSpec& spec) {
  std::vector<std::string> ops{"prefill", "decode"};
  if (spec.risk_kv && !spec.risk_kv->omission.empty()) ops.push_back("reconstruct");
  if (spec.proxy_kv) {
    ops.push_back("proxy_score");
    ops.push_back("prune");
  }
  return ops;
}

void check_cost_table(const Reader& top, const ScenarioSpec& spec) {
  // Everything `kvshift run` would refuse in the table is refused here, so validate agrees.
  const std::string& path = spec.cost_source.profile_path;
  if (!std::filesystem::is_regular_file(path)) return;  // the cross-check reports a missing file
  try {
    const CostTable table = read_cost_table(path);
    if (table.model != spec.model.name) {
      top.problem("cost_source", path + " was measured for model \"" + table.model + "\", not \"" +
                                     spec.model.name + "\"");
    }
    for (const std::string& op : ops_needed(spec)) {
      if (!table_has(table, op)) {
        top.problem("cost_source", path + " has no \"" + op +
                                       "\" entries, and the scenario needs them" +
                                       (op == "decode"        ? " (every serving step is one)"
                                        : op == "reconstruct" ? " (it uses RISK-KV)"
                                                              : " (it uses ProxyKV)"));
      }
    }
    if (spec.proxy_kv && table.proxy && *table.proxy != spec.proxy_kv->proxy_model.name) {
      top.problem("cost_source", path + " timed proxy_score with the proxy \"" + *table.proxy +
                                     "\", not the scenario's \"" + spec.proxy_kv->proxy_model.name +
                                     "\"");
    }
    (void)make_table_costs(table, path);  // entry-level checks
  } catch (const InputError& e) {
    top.problem("cost_source", e.what());
  }
}

void check_live(const Reader& top, const ScenarioSpec& spec) {
  const LiveSpec& l = spec.cost_source.live;
  if (l.model.empty() || !top.node().contains("live") || !top.node()["live"].is_object()) {
    return;  // reported when parsed
  }
  const auto live = top.object("live", false);
  const std::filesystem::path config = std::filesystem::path(l.model) / "config.json";
  if (!std::filesystem::is_regular_file(config)) {
    live->problem("model", l.model + " is not a model folder (no config.json)");
    return;
  }
  try {
    const cost_model::ModelSpec m = resolve_model(l.model);
    const auto& s = spec.model;
    for (const auto& [field, a, b] : {std::tuple{"layers", m.layers, s.layers},
                                      {"hidden", m.hidden, s.hidden},
                                      {"q_heads", m.q_heads, s.q_heads},
                                      {"kv_heads", m.kv_heads, s.kv_heads},
                                      {"head_dim", m.head_dim, s.head_dim},
                                      {"intermediate", m.intermediate, s.intermediate},
                                      {"vocab", m.vocab, s.vocab}}) {
      if (a != b) {
        live->problem("model", l.model + " has " + field + " " + std::to_string(a) +
                                   ", the scenario's model " + s.name + " " + std::to_string(b) +
                                   ": the live costs must run the scenario's model");
        break;
      }
    }
  } catch (const InputError& e) {
    live->problem("model", e.what());
  }
  if (spec.risk_kv && !spec.risk_kv->omission.empty() && l.predictors.empty()) {
    live->problem(
        "needs \"predictors\" (the predictors.safetensors calibrated for the "
        "topology): the scenario uses RISK-KV");
  }
  if (spec.proxy_kv && l.mapper.empty()) {
    live->problem("needs \"mapper\" (a trained mapper.safetensors): the scenario uses ProxyKV");
  }
  for (const auto& [key, path] : {std::pair{"predictors", l.predictors}, {"mapper", l.mapper}}) {
    if (!path.empty() && !std::filesystem::exists(path)) {
      live->problem(key, path + " does not exist");
    }
  }
  if (!l.proxy.empty() && !std::filesystem::is_directory(l.proxy)) {
    live->problem("proxy", l.proxy + " is not a folder");
  }
}

namespace {

LiveSpec parse_live(const Reader& r, LoadContext& ctx) {
  r.allow_only(keys::kLive);
  LiveSpec l;
  l.backend = enum_field<std::string>(r, "backend", {{"cpu", "cpu"}, {"cuda", "cuda"}}, false)
                  .value_or("cpu");
  if (auto m = r.string("model", true)) l.model = resolve_path(ctx, *m);
  if (auto p = r.string("proxy", false)) l.proxy = resolve_path(ctx, *p);
  l.proxy_layers = static_cast<int>(int_in(r, "proxy_layers", 1, 1 << 16, false).value_or(0));
  if (!l.proxy.empty() && l.proxy_layers > 0) {
    r.problem("proxy_layers", "give \"proxy\" or \"proxy_layers\", not both");
  }
  if (auto p = r.string("predictors", false)) l.predictors = resolve_path(ctx, *p);
  if (auto p = r.string("mapper", false)) l.mapper = resolve_path(ctx, *p);
  l.warmup = static_cast<int>(int_in(r, "warmup", 0, 100, false).value_or(1));
  l.repeats = static_cast<int>(int_in(r, "repeats", 1, 1000, false).value_or(3));
  return l;
}

}  // namespace

CostSourceSpec parse_cost_source(const Reader& top, LoadContext& ctx) {
  CostSourceSpec c;
  auto s = top.string("cost_source", false);
  if (s && *s == "live") {
    c.kind = CostSourceKind::kLive;
  } else if (s && s->starts_with("profile:") && s->size() > 8) {
    c.kind = CostSourceKind::kProfile;
    c.profile_path = resolve_path(ctx, s->substr(8));
  } else if (s && *s != "analytic") {
    top.problem("cost_source",
                "expected \"analytic\", \"profile:PATH\" or \"live\" (got \"" + *s + "\")");
  }
  const bool live = c.kind == CostSourceKind::kLive;
  if (live && !top.has("live")) {
    top.problem("live",
                "required with cost_source \"live\": at least {\"model\": a folder with "
                "the weights} (see scenarios/README.md)");
  } else if (!live && top.has("live")) {
    top.problem("live", "applies only to cost_source \"live\"");
  } else if (auto r = top.object("live", false)) {
    c.live = parse_live(*r, ctx);
  }
  return c;
}

SloSpec parse_slo(const Reader& r) {
  r.allow_only(keys::kSlo);
  SloSpec s;
  s.ttft = duration_at_least0(r, "ttft", true, false);
  s.tpot = duration_at_least0(r, "tpot", true, false);
  s.e2e = duration_at_least0(r, "e2e", true, false);
  return s;
}

void parse_outputs(const Reader& r, ScenarioSpec& s) {
  r.allow_only(keys::kOutputs);
  OutputSpec& o = s.outputs;
  o.dir = r.string("dir", false).value_or("");
  if (r.has("files")) {
    o.files.clear();
    r.each("files", [&](const Reader& e) {
      static constexpr std::string_view kFiles[] = {"summary", "requests", "recoveries", "links",
                                                    "trace"};
      const std::string v = e.node().is_string() ? e.node().get<std::string>() : e.node().dump();
      if (!e.node().is_string() ||
          std::find(std::begin(kFiles), std::end(kFiles), v) == std::end(kFiles)) {
        e.problem(
            "expected one of \"summary\", \"requests\", \"recoveries\", \"links\", \"trace\" "
            "(got " +
            e.node().dump() + ")");
      } else if (std::find(o.files.begin(), o.files.end(), v) != o.files.end()) {
        e.problem("duplicate file \"" + v + "\"");
      } else {
        o.files.push_back(v);
      }
    });
    if (o.files.empty() && r.node()["files"].is_array() && r.node()["files"].empty()) {
      r.problem("files",
                "must name at least one file (e.g. [\"summary\"]): a run that writes "
                "nothing is refused before it simulates");
    }
  }
  s.link_sample_interval =
      duration_at_least0(r, "link_sample_interval", true, false).value_or(s.link_sample_interval);
}

}  // namespace kvshift::input::detail
