// LiveCosts: the "live" cost source. Every op the simulation asks for runs on
// a Profiler (CPU or CUDA) with the real weights of ProfileRequest::inputs the
// first time its shape bucket is needed, and is cached: token counts (and the
// decode context per request) are bucketed to powers of two from 16, the
// sharing and batch axes to powers of two from 1; a value between buckets is
// interpolated log-log from the buckets on both sides, as TableCosts does with
// a table. Each bucket is timed with warm-up runs and the median of repeats;
// sources() reports how many shapes each op measured and their worst spread.
// A decode step whose caches would exceed kMaxDecodeKvBytes is measured at the
// largest batch that fits and extended along the batch with the power law of
// the two largest measured batches (sources() says how many were).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backend/profiler.hpp"
#include "cost_model/compute_costs.hpp"
#include "cost_model/table_costs.hpp"

namespace kvshift::backend {

class LiveCosts final : public cost_model::ComputeCosts {
 public:
  /// KV held by one decode measurement at most (fp32 K and V of every layer).
  static constexpr double kMaxDecodeKvBytes = 4.0 * (1ull << 30);

  /// `request` fixes the models, topology, inputs, retention, warm-up, repeats and seed; its
  /// shapes and ops are ignored (each measurement sets its own).
  LiveCosts(std::unique_ptr<Profiler> profiler, ProfileRequest request);

  Seconds prefill(const cost_model::ModelSpec& m, std::int64_t tokens) const override;
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t batch,
                      std::int64_t context_tokens) const override;
  Seconds reconstruct(const cost_model::ModelSpec& m, const cost_model::OmissionPlan& t,
                      std::int64_t tokens, std::int64_t requests,
                      cost_model::DType predictor_dtype) const override;
  Seconds proxy_score(const cost_model::ModelSpec& proxy, const cost_model::ModelSpec& target,
                      std::int64_t tokens) const override;
  Seconds prune(const cost_model::ModelSpec& m, std::int64_t tokens,
                double retention) const override;
  std::vector<cost_model::OpSource> sources() const override;

  /// Every row measured so far (what `kvshift profile` would have written for these shapes).
  std::vector<OpTiming> measured_rows() const;
  const Profiler& profiler() const { return *profiler_; }
  const ProfileRequest& request() const { return request_; }

 private:
  using Key = std::tuple<std::string, std::int64_t, std::int64_t>;  // op, tokens, second axis
  double bucketed(const std::string& op, std::int64_t tokens, std::int64_t second) const;
  double along_tokens(const std::string& op, std::int64_t tokens, std::int64_t second) const;
  double measured(const std::string& op, std::int64_t tokens, std::int64_t second) const;
  void check_target(const cost_model::ModelSpec& m, const char* op) const;

  std::unique_ptr<Profiler> profiler_;
  ProfileRequest request_;
  std::string label_;
  mutable std::mutex mutex_;  // sweeps may share one provider across threads
  mutable std::map<Key, OpTiming> rows_;
  mutable std::map<std::string, std::int64_t> extrapolated_;
};

}  // namespace kvshift::backend
