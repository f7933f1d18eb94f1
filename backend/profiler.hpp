// Profiler: times the real operations a migration or recovery runs (prefill,
// a decode step, RISK-KV reconstruction, ProxyKV scoring, pruning, loading the
// predictors) on one backend and returns the rows of a cost table (see
// `kvshift profile` and the live cost source). The weights are the real ones
// when ProfileRequest::inputs holds them (load_profile_inputs), else seeded
// random weights of the spec's shape, and the table says which. The CPU
// profiler lives in kvshift_backend; the CUDA one in kvshift_backend_cuda,
// which, when CUDA is not compiled, still exists and whose factory says so.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"

namespace kvshift::backend {

struct ModelWeights;
struct GroupPredictor;
class HybridAxialMapper;
struct MapperWeights;

/// One measured operation at one shape: a row of the cost table.
struct OpTiming {
  /// "prefill" | "decode" | "reconstruct" | "proxy_score" | "prune" | "predictor_load"
  std::string op;
  std::int64_t tokens = 0;   ///< prompt tokens; decode: context tokens per request
  std::int64_t sharing = 1;  ///< reconstruct: requests sharing the predictors, else 1
  std::int64_t batch = 1;    ///< decode: requests in the step, else 1
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  int repeats = 0;
};

/// Where one input came from: its file (or "seeded random") and a digest of its bytes.
struct InputOrigin {
  std::string path;    ///< file or folder; empty for seeded random weights
  std::string digest;  ///< "fnv1a64:<16 hex>" of the file's bytes; empty for seeded random
  bool real() const { return !path.empty(); }
};

/// The real weights the ops run with, loaded once (load_profile_inputs) and shared by every
/// run. A null member means seeded random weights of the spec's shape.
struct ProfileInputs {
  std::shared_ptr<const ModelWeights> target;
  std::shared_ptr<const ModelWeights> proxy;
  /// The calibrated predictors, one per group of ProfileRequest::omission, in its order.
  std::shared_ptr<const std::vector<GroupPredictor>> predictors;
  std::shared_ptr<const HybridAxialMapper> mapper;
  /// `mapper`'s tensors as plain data (shared_weights(mapper)), for the CUDA backend, which
  /// does not link the CPU one and uploads them. Set with it.
  std::shared_ptr<const MapperWeights> mapper_weights;
  /// KVZip's repeat prompt, for a mapper trained on log_repeat_max_attention features.
  std::vector<std::int32_t> repeat_prompt;
  InputOrigin target_origin, proxy_origin, predictors_origin, mapper_origin;
};

struct ProfileRequest {
  cost_model::ModelSpec model;
  std::optional<cost_model::ModelSpec> proxy;  ///< ProxyKV scorer; no proxy ops without it
  cost_model::OmissionPlan omission;           ///< groups reconstructed
  ProfileInputs inputs;                        ///< real weights; null members: seeded random
  std::vector<std::int64_t> tokens{128, 512, 2048};
  std::vector<std::int64_t> sharing{1, 4, 16};
  /// Decode steps are timed at every (batch, context per request) pair; empty: no decode rows.
  std::vector<std::int64_t> decode_batches;
  std::vector<std::int64_t> decode_contexts;
  /// Which ops run (empty: all that apply). Lets the live source measure one op at one shape.
  std::vector<std::string> ops;
  double retention = 0.3;  ///< ProxyKV keep ratio for `prune`
  cost_model::DType predictor_dtype = cost_model::DType::kF32;
  int warmup = 1;
  int repeats = 5;
  std::uint64_t seed = 1;  ///< seeded random weights and inputs
  /// Whether `op` is asked for (inline: the CUDA library asks too and does not link the CPU one).
  bool wants(const std::string& op) const {
    return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
  }
};

class Profiler {
 public:
  virtual ~Profiler() = default;
  /// "cpu" or "cuda".
  virtual std::string backend_name() const = 0;
  /// Human-readable device: CPU model and core count, or GPU name and driver/runtime versions.
  virtual std::string device_description() const = 0;
  /// Per op, what its timing leaves out on this backend (empty: nothing), printed next to it.
  virtual std::map<std::string, std::string> notes() const { return {}; }
  /// Runs every asked op at every shape of `request`; warm-up runs are not timed.
  virtual std::vector<OpTiming> run(const ProfileRequest& request) = 0;
};

/// Thrown by a factory whose backend was not compiled into this build.
class NotCompiled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The host CPU's model name (/proc/cpuinfo), or "unknown CPU".
std::string cpu_model_name();

/// Eigen reference backend; always available.
std::unique_ptr<Profiler> make_cpu_profiler();
/// CUDA backend; throws NotCompiled when built without CUDA, std::runtime_error without a device.
std::unique_ptr<Profiler> make_cuda_profiler();

}  // namespace kvshift::backend
