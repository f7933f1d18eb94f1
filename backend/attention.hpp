// Causal grouped-query attention on the CPU, and the attention statistics the
// pruning scores are built from. Queries are processed in chunks of rows so
// that at most chunk × keys scores exist at once (never T × T); heads run in
// parallel (OpenMP) when the backend is built with it.
#pragma once

#include <cstdint>

#include "backend/tensor.hpp"

namespace kvshift::backend {

/// Per-key attention statistics of one forward pass, one row per (layer, query head):
/// row = layer·q_heads + head, one column per key (history + new tokens).
struct AttentionStats {
  Matrix mass;  ///< Σ over the new queries of the weight each key receives (H2O, proxy features)
  Matrix window_mass;  ///< the same over the last `window` new queries only (SnapKV)
  Matrix max;          ///< max weight any new query gives the key (KVZip)
  int window = 0;
};

struct AttentionDesc {
  int q_heads = 0;
  int kv_heads = 0;  ///< q_heads is a multiple of kv_heads (GQA)
  int head_dim = 0;
  std::int64_t first_position = 0;  ///< position of the first query; keys 0..first_position+T-1
};

/// out[T, q_heads·d] = softmax(q·kᵀ/√d, causal) · v for q [T, q_heads·d] and k, v
/// [first_position + T, kv_heads·d]. If `stats` is given, adds this pass's statistics
/// into its rows for `layer` (they must be sized already).
void causal_attention(const Matrix& q, const Matrix& k, const Matrix& v, const AttentionDesc& d,
                      Matrix& out, AttentionStats* stats = nullptr, int layer = 0);

/// Threads the CPU backend uses for Eigen's GEMMs and its own loops: 1 unless the
/// environment sets KVSHIFT_THREADS or set_cpu_threads() was called (needs OpenMP).
/// One is the default because a shared or oversubscribed machine makes OpenMP
/// barriers far slower than the work (see bench/backend_prefill_bench.cpp).
int cpu_threads();
/// Sets the CPU backend's thread count.
void set_cpu_threads(int threads);
/// Applies the thread setting to Eigen once (called by the ops before their GEMMs).
void apply_cpu_threads();

}  // namespace kvshift::backend
