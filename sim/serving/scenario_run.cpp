#include "sim/serving/scenario_run.hpp"

#include <algorithm>
#include <memory>

#include "sim/serving/network_fabric.hpp"
#include "sim/serving/serving_model.hpp"

namespace kvshift::sim {
namespace {

// Durations of one deployment's model and methods on the GPUs `compute` describes.
std::unique_ptr<ServingCosts> costs_for(const cost_model::ComputeCosts& compute,
                                        const DeploymentSpec& d) {
  static const cost_model::OmissionPlan none;
  std::optional<cost_model::ModelSpec> proxy;
  if (d.proxy_kv) proxy = d.proxy_kv->proxy_model;
  return std::make_unique<ServingCosts>(
      compute, d.model, d.risk_kv ? d.risk_kv->omission : none,
      d.risk_kv ? d.risk_kv->predictor_dtype : cost_model::DType::kF32, proxy,
      d.proxy_kv ? d.proxy_kv->retention : 0.5);
}

}  // namespace

std::vector<RunResult> run_scenario(const SimulationSpec& spec,
                                    const cost_model::ComputeCosts& compute,
                                    const RunOptions& options) {
  // The costs point into these specs: they live as long as the runs.
  const std::vector<DeploymentSpec> served = served_deployments(spec);
  const std::unique_ptr<ServingCosts> costs = costs_for(compute, served.front());
  // A pool is priced by its deployment's model, on the roofline of its own GPU when it has
  // one (the loader allows per-pool GPUs and several models only with analytic costs: a
  // profile or live table measures one model on one GPU).
  std::vector<std::unique_ptr<cost_model::RooflineCosts>> rooflines;
  std::vector<std::unique_ptr<ServingCosts>> pool_costs;
  std::vector<const ServingCosts*> by_pool;
  for (std::size_t p = 0; p < spec.pools.size(); ++p) {
    const PoolSpec& pool = spec.pools[p];
    const auto serves = [&](const DeploymentSpec& d) {
      return std::find(d.pools.begin(), d.pools.end(), static_cast<int>(p)) != d.pools.end();
    };
    const auto d = std::find_if(served.begin(), served.end(), serves);
    if (!pool.gpu && d == served.begin()) {
      by_pool.push_back(nullptr);
      continue;
    }
    const cost_model::ComputeCosts* on = &compute;
    if (pool.gpu) {
      rooflines.push_back(std::make_unique<cost_model::RooflineCosts>(*pool.gpu));
      on = rooflines.back().get();
    }
    pool_costs.push_back(costs_for(*on, d == served.end() ? served.front() : *d));
    by_pool.push_back(pool_costs.back().get());
  }

  std::vector<RunResult> results;
  for (Strategy strategy : spec.policies.strategies) {
    Simulator sim;
    NetworkFabric fabric(sim, spec.cluster, spec.gpu.name);
    ServingModel model(sim, fabric, spec, *costs, strategy,
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
