// One full cost-model evaluation: storage and (optionally) latency for one
// configuration. This is what `kvshift cost` prints and what sweeps evaluate
// millions of times, so it allocates nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cost_model/latency.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/storage.hpp"

namespace kvshift::cost_model {

struct CostQuery {
  const ModelSpec* model = nullptr;
  const OmissionPlan* omission = nullptr;
  const GpuSpec* gpu = nullptr;
  const ComputeCosts* compute = nullptr;  ///< required when `path` is set
  std::int64_t tokens = 512;
  DType predictor_dtype = DType::kF32;
  std::int64_t sharing = 1;
  double retention = 0.3;
  std::optional<Path> path;
  TransferEngine engine;                          ///< what every KV leg pays besides its bytes
  const ComputeCosts* prefill_compute = nullptr;  ///< P/D: the prefill GPU; nullptr: no P/D figures
  std::string prefill_gpu;                        ///< its name, for the report
  std::optional<std::int64_t> held_tokens;  ///< prefix_recompute: KV tokens a stale replica holds
};

/// P/D disaggregation: TTFT of one request = prefill on the prefill GPU + its handoff
/// (the move figures above), or a decode-side prefill (token replay: no handoff).
struct PdReport {
  Seconds prefill_on_prefill_gpu;
  /// TTFT by handoff strategy: every strategy priced that ships the prompt's KV from the
  /// prefill GPU (not token replay: that is the decode-side prefill; not prefix_recompute: a
  /// handoff holds the whole prompt).
  StrategySeconds ttft;
  Seconds decode_side_prefill;
};

struct CostRecord {
  StorageReport storage;
  std::optional<LatencyReport> latency;
  std::optional<PdReport> pd;
};

/// Validates the query's numbers (throws InputError naming the flag) and evaluates it.
CostRecord evaluate(const CostQuery& q);

}  // namespace kvshift::cost_model
