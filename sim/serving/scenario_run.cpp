#include "sim/serving/scenario_run.hpp"

#include <memory>

#include "sim/serving/network_fabric.hpp"
#include "sim/serving/serving_model.hpp"

namespace kvshift::sim {

std::vector<RunResult> run_scenario(const SimulationSpec& spec,
                                    const cost_model::ComputeCosts& compute,
                                    const RunOptions& options) {
  const cost_model::OmissionPlan none;
  const cost_model::OmissionPlan& omission = spec.risk_kv ? spec.risk_kv->omission : none;
  const cost_model::DType predictor_dtype =
      spec.risk_kv ? spec.risk_kv->predictor_dtype : cost_model::DType::kF32;
  std::optional<cost_model::ModelSpec> proxy;
  if (spec.proxy_kv) proxy = spec.proxy_kv->proxy_model;
  const double retention = spec.proxy_kv ? spec.proxy_kv->retention : 0.5;
  const ServingCosts costs(compute, spec.model, omission, predictor_dtype, proxy, retention);
  // A pool with its own GPU is priced by the roofline of that GPU (the loader allows
  // per-pool GPUs only with analytic costs: a profile or live table measures one GPU).
  std::vector<std::unique_ptr<cost_model::RooflineCosts>> rooflines;
  std::vector<std::unique_ptr<ServingCosts>> pool_costs;
  std::vector<const ServingCosts*> by_pool;
  for (const PoolSpec& pool : spec.pools) {
    if (!pool.gpu) {
      by_pool.push_back(nullptr);
      continue;
    }
    rooflines.push_back(std::make_unique<cost_model::RooflineCosts>(*pool.gpu));
    pool_costs.push_back(std::make_unique<ServingCosts>(*rooflines.back(), spec.model, omission,
                                                        predictor_dtype, proxy, retention));
    by_pool.push_back(pool_costs.back().get());
  }

  std::vector<RunResult> results;
  for (Strategy strategy : spec.policies.strategies) {
    Simulator sim;
    NetworkFabric fabric(sim, spec.cluster, spec.gpu.name);
    ServingModel model(sim, fabric, spec, costs, strategy,
                       {options.record_trace, options.keep_records, options.sink}, by_pool);
    model.start();
    const SimTime end = from_seconds(spec.duration);
    const std::int64_t slice = std::max<std::int64_t>(end.ns / 100, 1);
    for (std::int64_t t = slice;; t += slice) {
      const SimTime until{std::min(t, end.ns)};
      sim.run_until(until);
      if (options.progress)
        options.progress(strategy_name(strategy), until.seconds(), end.seconds());
      if (until >= end) break;
    }
    results.push_back(model.finish());
  }
  return results;
}

}  // namespace kvshift::sim
