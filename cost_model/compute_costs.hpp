// ComputeCosts: how long GPU work takes. The cost model and the simulator ask
// this interface and never care where the answer comes from: the analytic
// roofline below, a measured cost table, or a live run of the real kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "cost_model/units.hpp"

namespace kvshift::cost_model {

/// Where one op's durations come from, as the reports print it next to the numbers.
struct OpSource {
  std::string op;      ///< "prefill" | "decode" | "reconstruct" | "proxy_score" | "prune"
  std::string source;  ///< e.g. "analytic (roofline of h200)", "table costs.json (cpu: ...)"
  std::int64_t measurements = 0;  ///< live: shapes measured so far; 0 otherwise
  /// Worst (p90 − p10) / median over the op's measured rows; 0 when nothing was measured.
  double spread = 0;
};

/// The five ops every cost source answers, in report order.
inline const std::vector<std::string>& compute_ops() {
  static const std::vector<std::string> ops{"prefill", "decode", "reconstruct", "proxy_score",
                                            "prune"};
  return ops;
}

class ComputeCosts {
 public:
  virtual ~ComputeCosts() = default;
  /// Prefill of `tokens` tokens for one request (token replay = this).
  virtual Seconds prefill(const ModelSpec& m, std::int64_t tokens) const = 0;
  /// Prefill of `tokens` new tokens after `prefix` tokens whose KV is already in place (a
  /// tail recompute): the new tokens attend to the prefix too. The default derives it from
  /// prefill(): the increment from `prefix` to `prefix + tokens` tokens plus one pass's fixed
  /// cost (a one-token prefill), never below prefill(tokens) — exact to one token's marginal
  /// cost for any cost quadratic in the tokens.
  virtual Seconds extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const;
  /// One decode step for `batch` requests holding `context_tokens` KV tokens in total.
  virtual Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                              std::int64_t context_tokens) const = 0;
  /// A chunk of `tokens` prompt tokens after `prefix` and one decode step of `batch`
  /// requests holding `context_tokens`, in one forward pass (chunked prefill's mixed batch):
  /// the chunk, plus what the step adds beyond the pass over the weights both share —
  /// extend + max(0, decode_step(batch, context) − decode_step(1, 0)).
  Seconds mixed_step(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens,
                     std::int64_t batch, std::int64_t context_tokens) const;
  /// RISK-KV reconstruction of `t`'s groups for `requests` requests of `tokens`
  /// tokens that share the predictors (one GEMM of requests·tokens rows per group).
  virtual Seconds reconstruct(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                              std::int64_t requests, DType predictor_dtype) const = 0;
  /// ProxyKV scoring of `tokens` tokens: the proxy's prefill with attention statistics and the
  /// mapper turning them into scores per target layer and KV head.
  virtual Seconds proxy_score(const ModelSpec& proxy, const ModelSpec& target,
                              std::int64_t tokens) const = 0;
  /// Keeping `retention` of `tokens` tokens' KV: top-K per KV head over the scores, then
  /// the kept rows of every layer gathered into a compact cache.
  virtual Seconds prune(const ModelSpec& m, std::int64_t tokens, double retention) const = 0;
  /// Per op of compute_ops(), where its durations came from (so far, for a live source).
  virtual std::vector<OpSource> sources() const = 0;
};

/// Roofline estimate from a GpuSpec: per phase max(FLOPs / achievable FLOP/s,
/// bytes / achievable bandwidth), phases summed, plus kernel launch overheads.
/// Leaves out: overlap between phases, tile quantisation, cache effects.
class RooflineCosts final : public ComputeCosts {
 public:
  explicit RooflineCosts(GpuSpec gpu);
  const GpuSpec& gpu() const { return gpu_; }

  Seconds prefill(const ModelSpec& m, std::int64_t tokens) const override;
  /// Exact: the new tokens' linear layers, their attention over prefix + causal part (at
  /// least the prefix's KV read once), their activations and KV write, one pass's launches.
  Seconds extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const override;
  Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                      std::int64_t context_tokens) const override;
  Seconds reconstruct(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      std::int64_t requests, DType predictor_dtype) const override;
  /// The proxy's roofline prefill plus 10 % for the mapper (a few small layers over the
  /// proxy's features; the measured CPU mapper is under 1 % of the target's prefill).
  Seconds proxy_score(const ModelSpec& proxy, const ModelSpec& target,
                      std::int64_t tokens) const override;
  /// Memory-bound: the scores read once, the kept K/V read and written, one launch per
  /// layer's K and V gather plus the top-K.
  Seconds prune(const ModelSpec& m, std::int64_t tokens, double retention) const override;
  std::vector<OpSource> sources() const override;

  /// FLOPs of a prefill of `tokens` tokens (linear layers, causal attention, last logits).
  static double prefill_flops(const ModelSpec& m, std::int64_t tokens);
  /// FLOPs of reconstructing `t` for `rows` token rows.
  static double reconstruct_flops(const ModelSpec& m, const OmissionPlan& t, std::int64_t rows);

 private:
  double compute_s(double flops, double efficiency) const;
  double memory_s(double bytes) const;

  GpuSpec gpu_;
};

}  // namespace kvshift::cost_model
