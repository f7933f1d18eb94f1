// The receiver's real work once a move's bytes are verified, on the CPU backend:
//   full_kv       decode the layers into the cache (no GPU work in the plan)
//   risk_kv       decode the kept layers, then rebuild the omitted groups from their anchors
//                 with the calibrated predictors (backend::reconstruct, one GEMM per group)
//   proxy_kv      compaction: the kept tokens' rows into a compact cache
//   token_replay  decode the ids, then prefill them (backend::Model::forward, no logits)
// Each is timed with a steady clock around the call, on the receiving agent's thread.
// Leaves out: the CUDA backend (the testbed runs where the CPU backend runs).
#pragma once

#include <span>
#include <string>

#include "backend/model.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/move_plan.hpp"
#include "testbed/transfer.hpp"

namespace kvshift::testbed {

struct RebuildContext {
  const backend::Model* model = nullptr;                ///< replay's prefill, the shapes
  std::span<const backend::GroupPredictor> predictors;  ///< RISK-KV: one per omitted group
  std::int64_t context_tokens = 0;                      ///< T of the request
};

struct Rebuilt {
  backend::KvCache cache;
  double decode_s = 0;   ///< bytes -> matrices
  double compute_s = 0;  ///< reconstruction, compaction or prefill (0 for full KV)
  std::string work;      ///< what compute_s timed
};

/// Rebuilds the request's KV from what `strategy` delivered.
Rebuilt rebuild(cost_model::Strategy strategy, const Delivery& delivery, const RebuildContext& ctx);

}  // namespace kvshift::testbed
