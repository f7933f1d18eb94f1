// The "deployments" section: a scenario that serves several models names each
// one, its model, the pools it runs on, its share of the arrivals that do not
// name a model, its own risk_kv / proxy_kv and, for generated arrivals, its own
// prompt and output lengths. Every pool belongs to exactly
// one deployment. A trace's "model" field names a deployment; without
// deployments it must name the scenario's model.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The deployment's pools, as indices, from its "pools" list of pool names. `owner`: pool ->
// the deployment (index) that named it, -1 for none yet; `earlier`: the deployments before it.
std::vector<int> pools_of(const Reader& d, const ScenarioSpec& s, std::vector<int>& owner,
                          const std::vector<sim::DeploymentSpec>& earlier) {
  const int self = static_cast<int>(earlier.size());
  std::vector<int> out;
  std::vector<std::string> names;
  for (const sim::PoolSpec& p : s.pools) names.push_back(p.name);
  if (!d.has("pools")) {
    d.problem("pools", "is required (the names of the pools this deployment runs on)");
    return out;
  }
  d.each("pools", [&](const Reader& n) {
    if (!n.node().is_string()) {
      n.problem("expected a pool name (a string)");
      return;
    }
    const std::string name = n.node().get<std::string>();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      n.problem("unknown pool \"" + name + "\"" + closest_name(name, names));
      return;
    }
    const int pool = static_cast<int>(it - names.begin());
    const int by = owner[static_cast<std::size_t>(pool)];
    if (by == self) {
      n.problem("pool \"" + name + "\" is listed twice");
      return;
    }
    if (by >= 0) {
      n.problem("pool \"" + name + "\" already serves deployment \"" +
                earlier[static_cast<std::size_t>(by)].name + "\"");
      return;
    }
    owner[static_cast<std::size_t>(pool)] = self;
    out.push_back(pool);
  });
  if (out.empty() && d.has("pools") && d.node()["pools"].is_array() && d.node()["pools"].empty()) {
    d.problem("pools", "names no pool");
  }
  return out;
}

// A deployment with a prefill pool hands its requests to a decode or mixed pool of its own.
void check_roles(const Reader& d, const ScenarioSpec& s, const sim::DeploymentSpec& dep) {
  bool prefill = false, decode = false;
  for (int p : dep.pools) {
    (s.pools[static_cast<std::size_t>(p)].role == sim::PoolRole::kPrefill ? prefill : decode) =
        true;
  }
  if (prefill && !decode) {
    d.problem("pools",
              "a prefill pool needs a decode or mixed pool of the same deployment to "
              "hand its requests to");
  }
}

// Resolves each trace request's "model" to a deployment index.
void resolve_trace_models(const Reader& top, ScenarioSpec& s, bool any_share) {
  if (s.workload.arrival != sim::ArrivalKind::kTrace) return;
  const std::optional<Reader> w = top.object("workload", false);
  if (!w) return;
  std::vector<std::string> names;
  for (const sim::DeploymentSpec& d : s.deployments) names.push_back(d.name);
  if (names.empty()) names.push_back(s.model.name);
  std::map<std::string, int> index;
  for (std::size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int>(i));
  std::size_t unknown = 0, unnamed = 0;
  for (std::size_t i = 0; i < s.workload.trace.size(); ++i) {
    sim::TraceRequest& t = s.workload.trace[i];
    if (t.model.empty()) {
      if (!any_share && s.deployments.size() > 1 && ++unnamed == 1) {
        w->problem("trace", "request " + std::to_string(i) +
                                " (in arrival order) names no model, and the deployments have no "
                                "\"share\" to draw one by");
      }
      continue;
    }
    const auto it = index.find(t.model);
    if (it != index.end()) {
      t.deployment = it->second;
    } else if (++unknown == 1) {
      w->problem("trace", "request " + std::to_string(i) +
                              " (in arrival order): field \"model\": unknown model \"" + t.model +
                              "\"" + closest_name(t.model, names) +
                              " (the scenario serves: " + join(names) + ")");
    }
  }
  if (unknown > 1) {
    w->problem("trace", std::to_string(unknown - 1) + " more requests name an unknown model");
  }
}

}  // namespace

/// What "deployments" rules out: a top-level model or method, no pools, profiled or live costs,
/// a storage tier. False when it cannot be read at all (no pools).
bool deployments_allowed(const Reader& top, const ScenarioSpec& s) {
  for (const char* key : {"model", "risk_kv", "proxy_kv"}) {
    if (top.has(key)) {
      top.problem(key,
                  "with \"deployments\", each deployment names its own model, risk_kv "
                  "and proxy_kv");
    }
  }
  if (s.pools.empty()) {
    top.problem("deployments",
                "needs \"pools\": each deployment runs on pools of its own (name them there)");
    return false;
  }
  if (s.cost_source.kind != CostSourceKind::kAnalytic) {
    top.problem("deployments",
                "several models need \"cost_source\": \"analytic\" (a profiled "
                "or live cost table measures one model)");
  }
  if (s.serving.prefix_cache.storage_tier) {
    top.problem("deployments",
                "serving.prefix_cache.storage_tier holds one model's blocks; it cannot be "
                "shared by several deployments");
  }
  return true;
}

/// Every deployment's share of the generated arrivals: all given and adding up to 1, or none
/// (then equal, and only a trace may name the model of each arrival).
void settle_shares(const Reader& top, const ScenarioSpec& s, std::vector<sim::DeploymentSpec>& out,
                   bool any_share, bool all_share, double share_sum) {
  if (any_share && !all_share) {
    top.problem("deployments", "give every deployment a \"share\", or none");
  } else if (any_share && std::abs(share_sum - 1) > 1e-9) {
    top.problem("deployments", "the deployments' shares must add up to 1 (they add up to " +
                                   std::to_string(share_sum) + ")");
  }
  if (!any_share && out.size() > 1 && s.workload.arrival != sim::ArrivalKind::kTrace) {
    top.problem("deployments",
                "a generated workload's arrivals name no model: give every "
                "deployment a \"share\"");
  }
  if (!any_share) {
    for (sim::DeploymentSpec& dep : out) dep.share = 1.0 / static_cast<double>(out.size());
  }
}

void parse_deployments(const Reader& top, ScenarioSpec& s, LoadContext& ctx) {
  std::vector<sim::DeploymentSpec> out;
  if (!top.has("deployments")) {
    resolve_trace_models(top, s, true);
    return;
  }
  if (!deployments_allowed(top, s)) return;
  std::vector<int> owner(s.pools.size(), -1);
  std::set<std::string> names;
  bool any_share = false, all_share = true;
  double share_sum = 0;
  top.each("deployments", [&](const Reader& d) {
    d.allow_only(keys::kDeployment);
    sim::DeploymentSpec dep;
    dep.name = d.string("name").value_or("");
    if (!dep.name.empty() && !names.insert(dep.name).second) {
      d.problem("name", "duplicate deployment name \"" + dep.name + "\"");
    }
    const std::size_t before_model = d.diagnostics().items().size();
    dep.model = parse_model(d, ctx);
    const bool model_ok = d.diagnostics().items().size() == before_model;
    dep.risk_kv = parse_risk_kv(d, dep.model, model_ok, ctx);
    dep.proxy_kv = parse_proxy_kv(d, ctx);
    dep.pools = pools_of(d, s, owner, out);
    check_roles(d, s, dep);
    for (const auto& [key, dist, min] : {std::tuple{"prompt_tokens", &dep.prompt_tokens, 1},
                                         {"output_tokens", &dep.output_tokens, 0}}) {
      if (!d.has(key)) continue;
      if (s.workload.arrival == sim::ArrivalKind::kTrace) {
        d.problem(key, "does not apply to arrival \"trace\" (the trace gives it)");
      } else {
        *dist = parse_token_dist(d, key, min);
      }
    }
    if (d.has("share")) {
      any_share = true;
      dep.share = number_in(d, "share", 0, 1, true, false).value_or(0);
      share_sum += dep.share;
    } else {
      all_share = false;
    }
    out.push_back(std::move(dep));
  });
  if (out.empty() && top.node()["deployments"].is_array()) {
    top.problem("deployments", "names no deployment");
  }
  for (std::size_t p = 0; p < s.pools.size(); ++p) {
    if (owner[p] < 0) {
      top.problem("deployments", "pool \"" + s.pools[p].name + "\" serves no deployment");
    }
  }
  settle_shares(top, s, out, any_share, all_share, share_sum);
  s.deployments = std::move(out);
  if (!s.deployments.empty()) {
    s.model = s.deployments.front().model;
    s.risk_kv = s.deployments.front().risk_kv;
    s.proxy_kv = s.deployments.front().proxy_kv;
  }
  resolve_trace_models(top, s, any_share);
}

}  // namespace kvshift::input::detail
