// RISK-KV online reconstruction (ARCHITECTURE.md, "RISK-KV"): for an
// omitted group g with anchor layers A_g and target layers T_g, take each
// anchor layer's cached keys, undo RoPE, concatenate [K_pre, V] of every
// anchor into X [T, |A_g|·w], compute Z = X·B_g + 1·d_gᵀ (one GEMM with a bias
// epilogue), split Z into each target layer's [K_pre, V], apply RoPE to K_pre
// (Gemma: after its per-head key norm) and write both into the cache. N requests sharing g's
// predictor are stacked into one GEMM of ΣT rows. The RoPE and the GEMM are the kernels' CPU ops
// (kernels/cpu.hpp); only the gather from and scatter into the per-layer cache
// are here. Leaves out: fitting the predictor (calibration).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/model.hpp"
#include "backend/tensor.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"

namespace kvshift::backend {

/// A folded predictor for one group. Row layout of X (and of Z) per layer is
/// [K_pre of all KV heads, V of all KV heads], layers in the order listed.
struct GroupPredictor {
  std::vector<int> anchor_layers;  ///< 0-based, ascending
  std::vector<int> target_layers;  ///< 0-based, ascending
  Matrix weight;                   ///< B: [|A|·w, |T|·w]
  RowVector bias;                  ///< d: [|T|·w]
  /// Gemma only, else empty: [|T|, head_dim], each target layer's key norm (1 + w). Its keys are
  /// RMSNorm(h·W_kᵀ) per head: the fold covers the projection, this norm is applied after it.
  Matrix key_norm;
  float norm_eps = 1e-6f;
  /// Rows [0, sink_rows) of the target layers are sent exact with the anchors, not rebuilt (the
  /// attention sinks: a rebuilt BOS row shifts the attention of every head that looks at it).
  /// The predictor was fitted without them.
  int sink_rows = 0;
};

/// Seeded random predictor for `plan` (for timing and tests).
GroupPredictor random_predictor(const cost_model::ModelSpec& spec,
                                const cost_model::GroupPlan& plan, std::uint64_t seed);

/// X for one request: [T, |A|·w] of pre-RoPE keys and values of the anchor layers.
Matrix anchor_features(const KvCache& cache, const std::vector<int>& anchor_layers,
                       const cost_model::ModelSpec& spec);

/// Rebuilds `p.target_layers` in every cache of `caches` (one GEMM over all their rows).
/// Target layers are overwritten (resized to the request's token count), except their first
/// p.sink_rows rows, which must be there already (sent exact). Throws std::invalid_argument on
/// inconsistent shapes.
void reconstruct_group(const GroupPredictor& p, std::span<KvCache* const> caches,
                       const cost_model::ModelSpec& spec);

/// Reconstructs every group of a topology, one predictor per group (same order).
void reconstruct(std::span<const GroupPredictor> predictors, std::span<KvCache* const> caches,
                 const cost_model::ModelSpec& spec);

}  // namespace kvshift::backend
