// Pass two, methods and placements: every strategy or protection mode that
// needs a method section has it; lossy choices fit the quality budget; the
// proxy model shares the target's tokenizer and is smaller; replica stores,
// proxy GPUs and predictor sources exist; the predictor cache can hold one
// predictor set.
#include <algorithm>
#include <cstdio>

#include "cost_model/storage.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {
namespace {

// The least a lossy method costs, or nullopt for lossless ones. Charged by context, it is the
// lowest measured context's figure: a move is then checked against the budget at its own.
std::optional<double> quality_cost(const sim::DeploymentSpec& m, bool risk) {
  const auto least = [](double flat, const std::vector<cost_model::ContextQuality>& by_context) {
    for (const auto& c : by_context) flat = std::min(flat, c.delta_nll);
    return flat;
  };
  if (risk && m.risk_kv) return least(m.risk_kv->delta_nll, m.risk_kv->delta_nll_by_context);
  if (!risk && m.proxy_kv) return least(m.proxy_kv->delta_nll, m.proxy_kv->delta_nll_by_context);
  return std::nullopt;
}

void need_method(const ScenarioSpec& s, const sim::DeploymentSpec& m, bool risk,
                 const std::string& ptr, const std::string& what, Diagnostics& d) {
  const bool have = risk ? m.risk_kv.has_value() : m.proxy_kv.has_value();
  const char* section = risk ? "risk_kv" : "proxy_kv";
  if (!have) {
    d.add(ptr, what + " needs a \"" + section + "\" section");
    return;
  }
  const auto cost = quality_cost(m, risk);
  if (s.policies.quality_budget && cost && *cost > *s.policies.quality_budget) {
    const bool by_context =
        risk ? !m.risk_kv->delta_nll_by_context.empty() : !m.proxy_kv->delta_nll_by_context.empty();
    d.add(ptr, what + " costs ΔNLL " + format_g(*cost) + " (" + section +
                   (by_context ? ".quality, its least at any measured context"
                               : std::string(".delta_nll")) +
                   "), over the quality_budget " + format_g(*s.policies.quality_budget));
  }
}

}  // namespace

bool serves(const ScenarioSpec& s, const sim::DeploymentSpec& m, const sim::ClusterNode& node) {
  return s.deployments.empty() ||
         std::find(m.pools.begin(), m.pools.end(), node.pool) != m.pools.end();
}

void check_methods(const ScenarioSpec& s, const sim::DeploymentSpec& m, Diagnostics& d) {
  for (std::size_t i = 0; i < s.policies.strategies.size(); ++i) {
    const sim::Strategy st = s.policies.strategies[i];
    if (st != sim::Strategy::kRiskKv && st != sim::Strategy::kProxyKv) continue;
    need_method(s, m, st == sim::Strategy::kRiskKv, "/policies/strategies/" + std::to_string(i),
                std::string("strategy \"") + sim::strategy_name(st) + "\"", d);
  }
  const sim::ProtectionMode mode = s.protection.mode;
  if (mode == sim::ProtectionMode::kRiskKv || mode == sim::ProtectionMode::kProxyKv) {
    need_method(s, m, mode == sim::ProtectionMode::kRiskKv, "/protection/mode",
                std::string("protection \"") + sim::protection_name(mode) + "\"", d);
  }
  if (m.proxy_kv) {
    const auto& p = m.proxy_kv->proxy_model;
    if (p.vocab != m.model.vocab) {
      d.add("/proxy_kv/proxy_model", "proxy " + p.name + " has a different tokenizer from " +
                                         m.model.name + " (vocab " + std::to_string(p.vocab) +
                                         " vs " + std::to_string(m.model.vocab) +
                                         "); ProxyKV needs a same-family proxy");
    } else if (p.parameter_count() >= m.model.parameter_count()) {
      d.add("/proxy_kv/proxy_model",
            "proxy " + p.name + " is not smaller than the target " + m.model.name);
    }
  }
}

void check_placements(const ScenarioSpec& s, const sim::DeploymentSpec& m, Diagnostics& d) {
  auto find = [&](const std::string& name) -> const sim::ClusterNode* {
    for (const auto& n : s.cluster.nodes) {
      if (n.name == name) return &n;
    }
    return nullptr;
  };
  const auto gpu_nodes = std::count_if(s.cluster.nodes.begin(), s.cluster.nodes.end(),
                                       [](const auto& n) { return n.kind == sim::NodeKind::kGpu; });
  const auto& pr = s.protection;
  if (pr.mode != sim::ProtectionMode::kNone) {
    if (pr.placement == sim::ReplicaPlacement::kStorage) {
      const sim::ClusterNode* n = find(pr.store);
      if (!n)
        d.add("/protection/store", "unknown node \"" + pr.store + "\"");
      else if (n->kind != sim::NodeKind::kStorage) {
        d.add("/protection/store", "node \"" + pr.store + "\" is not a storage node");
      }
    } else if (pr.placement != sim::ReplicaPlacement::kLocal && gpu_nodes < 2) {
      d.add("/protection/placement",
            "replicas on another GPU node need at least 2 GPU nodes (have " +
                std::to_string(gpu_nodes) + ")");
    }
  }
  if (m.proxy_kv && m.proxy_kv->placement == sim::ProxyPlacement::kProxyGpu) {
    for (const auto& n : s.cluster.nodes) {
      if (!serves(s, m, n)) continue;
      if (n.kind == sim::NodeKind::kGpu && n.gpu_count < 2) {
        d.add("/proxy_kv/placement",
              "\"proxy_gpu\" reserves one GPU per node for the proxy, but node \"" + n.name +
                  "\" has 1 GPU");
        break;
      }
    }
  }
  const auto& pd = s.predictors;
  if (pd.placement != sim::PredictorPlacement::kOnDemand) return;
  if (!find(pd.source)) d.add("/predictors/source", "unknown node \"" + pd.source + "\"");
  if (pd.hbm_budget && m.risk_kv) {
    cost_model::StorageOptions opt;
    opt.predictor_dtype = m.risk_kv->predictor_dtype;
    const Bytes set =
        cost_model::storage(m.model, m.risk_kv->omission, 1, opt).predictor_bytes_total;
    if (*pd.hbm_budget < set) {
      d.add("/predictors/hbm_budget", "cannot hold one predictor set of " + m.model.name + " (" +
                                          format_mib(set) + ", budget " +
                                          format_mib(*pd.hbm_budget) + ")");
    }
  }
}

}  // namespace kvshift::input::detail
