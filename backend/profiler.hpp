// Profiler: times the real operations a migration or recovery runs (prefill,
// RISK-KV reconstruction, ProxyKV scoring, pruning) on one backend and returns
// the rows of a cost table (see `kvshift profile`). The CPU profiler lives in
// kvshift_backend; the CUDA one in kvshift_backend_cuda, which, when CUDA is
// not compiled, still exists and whose factory says so.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cost_model/model_spec.hpp"
#include "cost_model/topology.hpp"

namespace kvshift::backend {

/// One measured operation at one shape: a row of the cost table.
struct OpTiming {
  std::string op;            ///< "prefill" | "reconstruct" | "proxy_score" | "prune"
  std::int64_t tokens = 0;
  std::int64_t sharing = 1;  ///< requests batched together (reconstruct), else 1
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  int repeats = 0;
};

struct ProfileRequest {
  cost_model::ModelSpec model;
  std::optional<cost_model::ModelSpec> proxy;  ///< ProxyKV scorer; no proxy ops without it
  /// A trained mapper (load_mapper) for proxy_score; empty: seeded random weights of the same
  /// shape (the CPU profiler; the CUDA profiler's proxy_score stops at the features).
  std::string mapper_path;
  cost_model::Topology topology;               ///< groups reconstructed
  std::vector<std::int64_t> tokens{128, 512, 2048};
  std::vector<std::int64_t> sharing{1, 4, 16};
  double retention = 0.3;                      ///< ProxyKV keep ratio for `prune`
  cost_model::DType predictor_dtype = cost_model::DType::kF32;
  int warmup = 1;
  int repeats = 5;
  std::uint64_t seed = 1;                      ///< seeded random weights and inputs
};

class Profiler {
 public:
  virtual ~Profiler() = default;
  /// "cpu" or "cuda".
  virtual std::string backend_name() const = 0;
  /// Human-readable device: CPU model and core count, or GPU name and driver/runtime versions.
  virtual std::string device_description() const = 0;
  /// Runs every op at every shape of `request`; warm-up runs are not timed.
  virtual std::vector<OpTiming> run(const ProfileRequest& request) = 0;
};

/// Thrown by a factory whose backend was not compiled into this build.
class NotCompiled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Eigen reference backend; always available.
std::unique_ptr<Profiler> make_cpu_profiler();
/// CUDA backend; throws NotCompiled when built without CUDA, std::runtime_error without a device.
std::unique_ptr<Profiler> make_cuda_profiler();

}  // namespace kvshift::backend
