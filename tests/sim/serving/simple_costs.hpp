// GPU durations that are easy to reason about, for tests of the GPU timeline and the moves.
#pragma once

#include <optional>

#include "cost_model/compute_costs.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "sim/serving/serving_costs.hpp"

namespace kvshift::sim {

// Durations that are easy to reason about: prefill 1 µs per token, a decode
// step 1 ms whatever the batch, reconstruction 2 µs per row.
class SimpleCosts final : public cost_model::ComputeCosts {
 public:
  Seconds prefill(const cost_model::ModelSpec&, std::int64_t t) const override {
    return {t * 1e-6};
  }
  Seconds decode_step(const cost_model::ModelSpec&, std::int64_t, std::int64_t) const override {
    return {1e-3};
  }
  Seconds reconstruct(const cost_model::ModelSpec&, const cost_model::OmissionPlan&, std::int64_t t,
                      std::int64_t n, cost_model::DType) const override {
    return {2e-6 * static_cast<double>(t * n)};
  }
  Seconds proxy_score(const cost_model::ModelSpec&, const cost_model::ModelSpec&,
                      std::int64_t t) const override {
    return {3e-7 * static_cast<double>(t)};
  }
  Seconds prune(const cost_model::ModelSpec&, std::int64_t t, double) const override {
    return {1e-8 * static_cast<double>(t)};
  }
  std::vector<cost_model::OpSource> sources() const override { return {}; }
};

/// SimpleCosts as a GPU worker asks for them: Qwen2.5-0.5B with the paper's omission plan, fp32
/// predictors and no proxy. Built in place (`costs` points at the members before it).
struct SimpleServingCosts {
  SimpleCosts compute;
  cost_model::ModelSpec model = cost_model::find_model("qwen2.5-0.5b");
  cost_model::OmissionPlan topo = cost_model::OmissionPlan::parse("paper", model);
  ServingCosts costs{compute, model, topo, cost_model::DType::kF32, std::nullopt};
};

}  // namespace kvshift::sim
