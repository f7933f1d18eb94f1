// The loader's driver: pass one over every section, pass two (cross_check)
// only when pass one found nothing, then a ScenarioSpec or the full list of
// problems. Also the embedded quickstart and the one-line summary.
#include "input/scenario_loader.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "input/quickstart_json.hpp"
#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input {
namespace {

constexpr double kMaxDurationS = 366.0 * 24 * 3600;  // keeps ns times far from int64 overflow

void parse_all(const Reader& top, ScenarioSpec& s, detail::LoadContext& ctx) {
  using namespace detail;
  top.allow_only(keys::kTop);
  if (auto v = top.string("name", false)) s.name = *v;
  s.description = top.string("description", false).value_or("");
  top.string("$schema", false);
  // With deployments, each names its model and methods (parse_deployments).
  const bool one_model = !top.has("deployments");
  const std::size_t before_model = top.diagnostics().items().size();
  if (one_model) s.model = parse_model(top, ctx);
  const bool model_ok = one_model && top.diagnostics().items().size() == before_model;
  s.gpu = parse_gpu(top, ctx);
  if (auto c = top.object("cluster")) s.cluster = parse_cluster(*c, s.gpu, ctx);
  if (auto w = top.object("workload")) s.workload = parse_workload(*w, ctx);
  if (auto r = top.object("serving", false)) s.serving = parse_serving(*r);
  if (auto r = top.object("protection", false)) s.protection = parse_protection(*r);
  s.events = parse_events(top, ctx);
  if (auto r = top.object("policies", false))
    s.policies = parse_policies(*r);
  else
    s.policies.strategies = {sim::Strategy::kFullKv, sim::Strategy::kTokenReplay};
  if (one_model) {
    s.risk_kv = parse_risk_kv(top, s.model, model_ok, ctx);
    s.proxy_kv = parse_proxy_kv(top, ctx);
  }
  if (auto r = top.object("predictors", false)) s.predictors = parse_predictors(*r);
  s.cost_source = parse_cost_source(top, ctx);
  s.pools = parse_pools(top, s, ctx);
  parse_deployments(top, s, ctx);
  if (auto r = top.object("transfer_engine", false)) s.transfer_engine = parse_transfer_engine(*r);
  if (s.cost_source.kind == CostSourceKind::kProfile && model_ok) check_cost_table(top, s);
  if (s.cost_source.kind == CostSourceKind::kLive && model_ok) check_live(top, s);
  s.seed = static_cast<std::uint64_t>(
      int_in(top, "seed", 0, std::numeric_limits<std::int64_t>::max(), false).value_or(1));
  if (auto d = duration_at_least0(top, "duration", true, true)) {
    if (d->value > kMaxDurationS) {
      top.problem("duration", "must be at most 366 days (got " + got(top, "duration") + ")");
    } else if (d->value < 1e-3) {  // shorter runs have no room for one request
      top.problem("duration", "must be at least 1ms (got " + got(top, "duration") + ")");
    } else {
      s.duration = *d;
    }
  }
  if (auto r = top.object("slo", false)) s.slo = parse_slo(*r);
  if (auto r = top.object("outputs", false)) parse_outputs(*r, s);
  check_scenario_name(top, s.name);
}

}  // namespace

namespace {

/// Parses JSON text like Json::parse, and lists every key an object repeats by its JSON pointer
/// (Json::parse keeps the last silently, so a scenario could say two things at once).
Json parse_noting_duplicates(std::string_view text, std::vector<std::string>& duplicates) {
  struct Frame {
    bool array = false;
    std::size_t index = 0;  ///< arrays: elements seen so far
    std::string key;        ///< objects: the key being read
    std::vector<std::string> keys;
  };
  std::vector<Frame> stack;
  auto pointer = [&] {
    std::string p;
    for (std::size_t i = 0; i + 1 < stack.size(); ++i) {
      p += "/" + (stack[i].array ? std::to_string(stack[i].index - 1) : stack[i].key);
    }
    return p;
  };
  auto element = [&] {  // a value, object or array starts inside an array
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  const Json::parser_callback_t note = [&](int, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      element();
      stack.push_back({event == E::array_start, 0, "", {}});
    } else if (event == E::object_end || event == E::array_end) {
      if (!stack.empty()) stack.pop_back();
    } else if (event == E::key && !stack.empty()) {
      Frame& f = stack.back();
      f.key = parsed.get<std::string>();
      if (std::find(f.keys.begin(), f.keys.end(), f.key) != f.keys.end()) {
        duplicates.push_back(pointer() + "/" + f.key + ": duplicate key \"" + f.key +
                             "\" (JSON keeps only the last one; write it once)");
      } else {
        f.keys.push_back(f.key);
      }
    } else if (event == E::value) {
      element();
    }
    return true;
  };
  return Json::parse(text.begin(), text.end(), note);
}

}  // namespace

ScenarioLoad try_load_scenario_text(std::string_view text, std::string_view source,
                                    const std::string& base_dir) {
  ScenarioLoad out;
  Json doc;
  std::vector<std::string> duplicates;
  try {
    doc = parse_noting_duplicates(text, duplicates);
  } catch (const Json::parse_error& e) {
    out.problems.push_back("/: not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    return out;
  } catch (const Json::exception& e) {  // e.g. a number too large for a double ("1e309")
    out.problems.push_back(std::string("/: not valid JSON: ") + e.what());
    return out;
  }
  Diagnostics diag;
  Reader top(doc, "", diag);
  ScenarioSpec spec;
  spec.source = std::string(source);
  spec.name = std::filesystem::path(std::string(source)).stem().string();
  detail::LoadContext ctx;
  ctx.base_dir = base_dir;
  if (!doc.is_object()) {
    diag.add("", "expected a JSON object (got " + std::string(doc.type_name()) + ")");
  } else {
    parse_all(top, spec, ctx);
    if (diag.empty()) detail::cross_check(spec, top, ctx);
    // Last, on a scenario that is otherwise valid: will it fit in memory and the model's context?
    if (diag.empty()) detail::check_run_size(top, spec);
    if (diag.empty() && spec.model.layers > 0) detail::check_context(top, spec, ctx);
  }
  out.problems = diag.items();
  out.problems.insert(out.problems.begin(), duplicates.begin(), duplicates.end());
  if (out.problems.empty()) out.spec = std::move(spec);
  return out;
}

ScenarioLoad try_load_scenario_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::filesystem::is_directory(path)) {
    if (f) std::fclose(f);
    if (std::filesystem::is_directory(path)) {
      return {std::nullopt, {"/: is a folder, not a scenario file"}};
    }
    return {std::nullopt, {"/: cannot open file"}};
  }
  std::string text;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return {std::nullopt, {"/: cannot read file"}};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return try_load_scenario_text(text, path, dir.empty() ? "." : dir);
}

namespace {

ScenarioSpec throw_or_take(ScenarioLoad load, std::string_view source) {
  if (load.spec) return std::move(*load.spec);
  std::string msg;
  for (const std::string& p : load.problems) {
    msg += (msg.empty() ? "" : "\n  ") + std::string(source) + ": " + p;
  }
  throw InputError(msg);
}

}  // namespace

ScenarioSpec load_scenario_text(std::string_view text, std::string_view source,
                                const std::string& base_dir) {
  return throw_or_take(try_load_scenario_text(text, source, base_dir), source);
}

ScenarioSpec load_scenario_file(const std::string& path) {
  return throw_or_take(try_load_scenario_file(path), path);
}

std::string_view embedded_quickstart_text() { return kQuickstartJson; }

ScenarioSpec load_embedded_quickstart() {
  ScenarioSpec s = load_scenario_text(kQuickstartJson, "<embedded quickstart.json>", ".");
  return s;
}

std::string summarize(const ScenarioSpec& s) {
  int gpu_nodes = 0, gpus = 0;
  for (const auto& n : s.cluster.nodes) {
    if (n.kind == sim::NodeKind::kGpu) {
      ++gpu_nodes;
      gpus += n.gpu_count;
    }
  }
  std::string strategies;
  for (auto st : s.policies.strategies)
    strategies += (strategies.empty() ? "" : ",") + std::string(sim::strategy_name(st));
  std::string arrivals;
  if (s.workload.arrival == sim::ArrivalKind::kTrace) {
    arrivals = "trace of " + std::to_string(s.workload.trace.size()) + " requests";
  } else {
    arrivals = std::string(s.workload.arrival == sim::ArrivalKind::kPoisson ? "poisson" : "gamma") +
               " " + format_g(s.workload.rate_per_s) + " req/s";
  }
  const std::string dur = format_g(s.duration.value) + "s";
  std::string models = s.model.name;
  if (!s.deployments.empty()) {
    models.clear();
    for (const sim::DeploymentSpec& d : s.deployments)
      models += (models.empty() ? "" : " + ") + d.name + " (" + d.model.name + ")";
  }
  return s.name + ": " + models + " on " + s.gpu.name + ", " + std::to_string(gpu_nodes) +
         " GPU nodes (" + std::to_string(gpus) + " GPUs), " +
         std::to_string(s.cluster.links.size()) + " links, " + arrivals + ", " +
         std::to_string(s.events.size()) + " events, protection " +
         sim::protection_name(s.protection.mode) + ", strategies " + strategies + ", " + dur;
}

}  // namespace kvshift::input
