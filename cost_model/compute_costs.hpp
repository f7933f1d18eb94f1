// ComputeCosts: how long GPU work takes. The cost model and the simulator ask
// this interface and never care where the answer comes from: the analytic
// roofline below, a measured cost table, or a live run of the real kernels.
#pragma once

#include <cstdint>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/topology.hpp"
#include "cost_model/units.hpp"

namespace kvshift::cost_model {

class ComputeCosts {
 public:
  virtual ~ComputeCosts() = default;
  /// Prefill of `tokens` tokens for one request (token replay = this).
  virtual Seconds prefill(const ModelSpec& m, std::int64_t tokens) const = 0;
  /// One decode step for `batch` requests holding `context_tokens` KV tokens in total.
  virtual Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                              std::int64_t context_tokens) const = 0;
  /// RISK-KV reconstruction of `t`'s groups for `requests` requests of `tokens`
  /// tokens that share the predictors (one GEMM of requests·tokens rows per group).
  virtual Seconds reconstruct(const ModelSpec& m, const Topology& t, std::int64_t tokens,
                              std::int64_t requests, DType predictor_dtype) const = 0;
};

/// Roofline estimate from a GpuSpec: per phase max(FLOPs / achievable FLOP/s,
/// bytes / achievable bandwidth), phases summed, plus kernel launch overheads.
/// Leaves out: overlap between phases, tile quantisation, cache effects.
class RooflineCosts final : public ComputeCosts {
 public:
  explicit RooflineCosts(GpuSpec gpu);
  const GpuSpec& gpu() const { return gpu_; }

  Seconds prefill(const ModelSpec& m, std::int64_t tokens) const override;
  Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                      std::int64_t context_tokens) const override;
  Seconds reconstruct(const ModelSpec& m, const Topology& t, std::int64_t tokens,
                      std::int64_t requests, DType predictor_dtype) const override;

  /// FLOPs of a prefill of `tokens` tokens (linear layers, causal attention, last logits).
  static double prefill_flops(const ModelSpec& m, std::int64_t tokens);
  /// FLOPs of reconstructing `t` for `rows` token rows.
  static double reconstruct_flops(const ModelSpec& m, const Topology& t, std::int64_t rows);

 private:
  double compute_s(double flops, double efficiency) const;
  double memory_s(double bytes) const;

  GpuSpec gpu_;
};

}  // namespace kvshift::cost_model
