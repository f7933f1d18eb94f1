// One full cost-model evaluation: storage and (optionally) latency for one
// configuration. This is what `kvshift cost` prints and what sweeps evaluate
// millions of times, so it allocates nothing.
#pragma once

#include <cstdint>
#include <optional>

#include "cost_model/latency.hpp"
#include "cost_model/storage.hpp"

namespace kvshift::cost_model {

struct CostQuery {
  const ModelSpec* model = nullptr;
  const Topology* topology = nullptr;
  const GpuSpec* gpu = nullptr;
  const ComputeCosts* compute = nullptr;  ///< required when `path` is set
  std::int64_t tokens = 512;
  DType predictor_dtype = DType::kF32;
  std::int64_t sharing = 1;
  double retention = 0.3;
  std::optional<Path> path;
};

struct CostRecord {
  StorageReport storage;
  std::optional<LatencyReport> latency;
};

/// Validates the query's numbers (throws InputError naming the flag) and evaluates it.
CostRecord evaluate(const CostQuery& q);

}  // namespace kvshift::cost_model
