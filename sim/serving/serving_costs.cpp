#include "sim/serving/serving_costs.hpp"

#include <algorithm>

namespace kvshift::sim {

ServingCosts::ServingCosts(const cost_model::ComputeCosts& compute,
                           const cost_model::ModelSpec& model,
                           const cost_model::OmissionPlan& omission,
                           cost_model::DType predictor_dtype,
                           std::optional<cost_model::ModelSpec> proxy, double retention)
    : compute_(&compute),
      model_(&model),
      omission_(&omission),
      predictor_dtype_(predictor_dtype),
      proxy_(std::move(proxy)),
      retention_(retention) {}

SimTime ServingCosts::prefill(std::int64_t tokens) const {
  return tokens <= 0 ? SimTime{} : from_seconds(compute_->prefill(*model_, tokens));
}

SimTime ServingCosts::extend(std::int64_t prefix, std::int64_t tokens) const {
  return tokens <= 0 ? SimTime{} : from_seconds(compute_->extend(*model_, prefix, tokens));
}

SimTime ServingCosts::decode_step(std::int64_t batch, std::int64_t context_tokens) const {
  return from_seconds(
      compute_->decode_step(*model_, std::max<std::int64_t>(batch, 1), context_tokens));
}

SimTime ServingCosts::mixed_step(std::int64_t prefix, std::int64_t tokens, std::int64_t batch,
                                 std::int64_t context_tokens) const {
  return from_seconds(compute_->mixed_step(*model_, prefix, tokens, batch, context_tokens));
}

SimTime ServingCosts::reconstruct(std::int64_t tokens, std::int64_t requests) const {
  if (omission_->empty() || tokens <= 0) return {};
  return from_seconds(
      compute_->reconstruct(*model_, *omission_, tokens, requests, predictor_dtype_));
}

SimTime ServingCosts::proxy_score(std::int64_t tokens) const {
  if (!proxy_ || tokens <= 0) return {};
  return from_seconds(compute_->proxy_score(*proxy_, *model_, tokens)) +
         from_seconds(compute_->prune(*model_, tokens, retention_));
}

}  // namespace kvshift::sim
