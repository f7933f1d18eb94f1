// Storage accounting for RISK-KV (ARCHITECTURE.md, "Storage, per request"):
// full/kept/saved KV bytes, predictor sizes (folded and unfolded) and the
// sharing arithmetic that decides when a predictor pays for itself.
#pragma once

#include <cstdint>

#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "cost_model/units.hpp"

namespace kvshift::cost_model {

struct StorageOptions {
  DType predictor_dtype = DType::kF32;
  std::int64_t sharing = 1;  ///< requests sharing one copy of the predictors
};

struct StorageReport {
  Bytes kv_full;
  Bytes kv_saved;
  Bytes kv_kept;
  double omitted_fraction = 0;
  std::int64_t predictor_params = 0;           ///< folded, all groups
  std::int64_t unfolded_predictor_params = 0;  ///< ridge before folding, all groups
  Bytes predictor_bytes_per_group;             ///< folded, largest group
  Bytes unfolded_bytes_per_group;              ///< unfolded, largest group
  Bytes predictor_bytes_total;
  std::int64_t sharing = 1;
  std::int64_t net_saving_bytes = 0;     ///< sharing·saved − predictor total (may be < 0)
  std::int64_t break_even_requests = 0;  ///< least N with N·saved ≥ predictor; 0 if nothing saved
  double predictor_to_saved_ratio = 0;   ///< predictor total / saved per request
};

/// Folded parameters of one group: (|A|·w)·(|T|·w) + |T|·w.
std::int64_t folded_params(const ModelSpec& m, const GroupPlan& g);
/// Unfolded ridge parameters of one group: (|A|·w)·(|T|·d) + |T|·d.
std::int64_t unfolded_params(const ModelSpec& m, const GroupPlan& g);

/// KV bytes of a whole request of `tokens` tokens.
constexpr Bytes kv_bytes(const ModelSpec& m, std::int64_t tokens) {
  return Bytes{m.layers * tokens * m.kv_bytes_per_layer_token()};
}

/// Storage figures for one request of `tokens` tokens under topology `t`.
StorageReport storage(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      const StorageOptions& options);

}  // namespace kvshift::cost_model
