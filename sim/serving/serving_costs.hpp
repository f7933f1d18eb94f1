// ServingCosts: the durations the serving model asks for, in simulated time.
// Wraps a cost_model::ComputeCosts (analytic roofline, a profiled table or a
// live backend) for one scenario's target model, RISK-KV omission plan and proxy
// model, and rounds each duration to the nanosecond once, here.
#pragma once

#include <cstdint>
#include <optional>

#include "cost_model/compute_costs.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {

class ServingCosts {
 public:
  ServingCosts(const cost_model::ComputeCosts& compute, const cost_model::ModelSpec& model,
               const cost_model::OmissionPlan& omission, cost_model::DType predictor_dtype,
               std::optional<cost_model::ModelSpec> proxy, double retention = 0.5);

  /// Prefill (and token replay) of `tokens` tokens of one request.
  SimTime prefill(std::int64_t tokens) const;
  /// Prefill of `tokens` tokens after `prefix` tokens whose KV is in place (a tail replay).
  SimTime extend(std::int64_t prefix, std::int64_t tokens) const;
  /// One decode step of `batch` requests holding `context_tokens` KV tokens in total.
  SimTime decode_step(std::int64_t batch, std::int64_t context_tokens) const;
  /// A prompt chunk and one decode step of the batch in one pass (ComputeCosts::mixed_step).
  SimTime mixed_step(std::int64_t prefix, std::int64_t tokens, std::int64_t batch,
                     std::int64_t context_tokens) const;
  /// RISK-KV reconstruction of `requests` requests of about `tokens` tokens each, in one batch.
  SimTime reconstruct(std::int64_t tokens, std::int64_t requests) const;
  /// ProxyKV's preparation of a move: the proxy's prefill of `tokens` tokens and the mapper,
  /// then the top-K and compaction of the kept KV at ρ = retention (on the scoring GPU).
  SimTime proxy_score(std::int64_t tokens) const;

  const cost_model::ModelSpec& model() const { return *model_; }
  const cost_model::OmissionPlan& omission() const { return *omission_; }
  const cost_model::ComputeCosts& compute() const { return *compute_; }

 private:
  const cost_model::ComputeCosts* compute_;
  const cost_model::ModelSpec* model_;
  const cost_model::OmissionPlan* omission_;
  cost_model::DType predictor_dtype_;
  std::optional<cost_model::ModelSpec> proxy_;
  double retention_;
};

}  // namespace kvshift::sim
