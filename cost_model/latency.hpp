// Latency of moving or rebuilding one request (ARCHITECTURE.md, "Latency"): the
// closed forms for an uncontended path with bottleneck bandwidth B and
// one-way latency τ. Contention is the simulator's business, not this file's.
#pragma once

#include <cstdint>
#include <optional>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "cost_model/strategy.hpp"
#include "cost_model/transfer_engine.hpp"
#include "cost_model/units.hpp"

namespace kvshift::cost_model {

/// An uncontended network path.
struct Path {
  BitsPerSecond bandwidth;  ///< bottleneck
  Seconds latency;          ///< one way
};

/// τ + 8·bytes/B: latency first, then the bytes at the bottleneck rate.
constexpr Seconds transfer_time(Bytes size, const Path& p) {
  return {p.latency.value + size.bits() / p.bandwidth.value};
}

/// Bytes of the token ids a replay ships (int32 per token).
constexpr Bytes token_id_bytes(std::int64_t tokens) { return Bytes{4 * tokens}; }

struct LatencyOptions {
  double retention = 0.3;  ///< ProxyKV: share of tokens kept
  DType predictor_dtype = DType::kF32;
  TransferEngine engine;  ///< setup and per-descriptor costs of the KV legs (ideal: zeros)
  /// prefix_recompute: tokens whose KV a stale replica holds (< tokens); empty: not priced.
  std::optional<std::int64_t> held_tokens;
  bool hybrid = true;  ///< price the hybrid split (a bisection: a dozen estimates)
};

/// A figure per strategy, for those priced; a fixed array (sweeps evaluate millions).
class StrategySeconds {
 public:
  void set(Strategy s, Seconds t) { v_[static_cast<std::size_t>(s)] = t; }
  bool has(Strategy s) const { return v_[static_cast<std::size_t>(s)].has_value(); }
  /// std::bad_optional_access for a strategy not priced.
  Seconds at(Strategy s) const { return v_[static_cast<std::size_t>(s)].value(); }

 private:
  std::array<std::optional<Seconds>, std::size(kStrategyTraits)> v_{};
};

struct LatencyReport {
  Seconds prefill;      ///< on the receiver, T tokens
  Seconds reconstruct;  ///< on the receiver, the topology's groups
  /// One move of the request by each concrete strategy: RISK-KV with its predictors already
  /// resident, ProxyKV with scoring off the critical path, hybrid (when LatencyOptions::hybrid)
  /// at its best split, prefix_recompute (when held_tokens) shipping the held prefix.
  StrategySeconds move;
  Seconds risk_kv_with_predictor;        ///< RISK-KV with its predictors shipped too
  std::int64_t hybrid_front_tokens = 0;  ///< hybrid's split: the first tokens recomputed
  Seconds local_replay;                  ///< local recovery: prefill(T)
  Seconds local_risk_kv;                 ///< local recovery: load kept KV from host + reconstruct
  /// B where RISK-KV (resident predictors) and full transfer tie; RISK-KV wins below it.
  /// Both crossovers are for an ideal link: engine costs favour the strategy with fewer
  /// descriptors further (the figures above include them).
  std::optional<BitsPerSecond> crossover_full;
  /// B where RISK-KV and token replay tie; RISK-KV wins above it. Empty if it never does.
  std::optional<BitsPerSecond> crossover_replay;
};

/// Latency figures for one request of `tokens` tokens over path `p`.
LatencyReport latency(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      const StorageReport& s, const Path& p, const GpuSpec& gpu,
                      const ComputeCosts& compute, const LatencyOptions& options);

}  // namespace kvshift::cost_model
