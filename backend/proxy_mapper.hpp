// HybridAxialMapper (ProxyKV): turns a proxy model's attention features
// X [in_channels = proxy layers·heads, T] into target-aligned token scores
// Ŷ [targets = target layers·KV heads, T]:
//   1. stem: 1-D convolution over time (in_channels → width, odd kernel, same
//      padding) + GELU, plus sinusoidal positions;
//   2. a pre-LayerNorm Transformer encoder over time whose attention sees only
//      a sliding window (|i − j| ≤ window/2), then a final LayerNorm → E [T, width];
//   3. cross-attention over the head axis: at each time t, learnable target
//      queries (one per target layer·head, shifted by E[t]) attend over the source
//      heads, whose keys/values are source embedding + X[i, t]·feature_proj + E[t];
//      the attended value projected to a scalar (+ bias) is Ŷ[target, t].
// The cross-attention is evaluated in an algebraically factored form (terms that
// are constant over the source axis cancel in the softmax), so it costs
// O(T·targets·sources) rather than O(T·targets·sources·width).
// Weights come from a safetensors file (names in proxy_mapper.cpp) or a seed;
// load_mapper() reads what tools/train_mapper.py writes (weights + mapper.json).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/mapper_weights.hpp"
#include "backend/safetensors.hpp"
#include "backend/tensor.hpp"

namespace kvshift::backend {

class HybridAxialMapper {
 public:
  /// Seeded random weights.
  static HybridAxialMapper random(const MapperConfig& config, std::uint64_t seed);
  /// Weights from `file`; every tensor's shape is checked against `config` (InputError).
  static HybridAxialMapper load(const SafetensorsFile& file, const MapperConfig& config);

  const MapperConfig& config() const { return w_.config; }
  /// Every tensor, as plain data (what the CUDA backend uploads).
  const MapperWeights& weights() const { return w_; }
  /// Ŷ [targets, T] for features [in_channels, T].
  Matrix forward(const Matrix& features) const;
  /// The encoder output E [T, width] (exposed for tests).
  Matrix encode(const Matrix& features) const;
  /// Ŷ computed directly (queries, keys and values materialised per t): the oracle
  /// the factored forward() is tested against. O(T·targets·sources·width).
  Matrix forward_direct(const Matrix& features) const;

  /// Tensor names and shapes this config expects (for writing or checking files).
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensor_shapes() const;

 private:
  template <typename Get>
  static HybridAxialMapper build(const MapperConfig& config, Get&& get);
  Matrix encoder_attention(const MapperEncoderLayer& l, const Matrix& a) const;

  MapperWeights w_;
};

/// `mapper`'s weights, sharing its ownership (ProfileInputs::mapper_weights).
inline std::shared_ptr<const MapperWeights> shared_weights(
    const std::shared_ptr<const HybridAxialMapper>& mapper) {
  return {mapper, &mapper->weights()};
}

/// A trained mapper: `path` is a .safetensors file with its architecture in the .json of
/// the same stem beside it (mapper.safetensors → mapper.json; else mapper.json in that
/// folder), or a folder holding mapper.safetensors and mapper.json. Every problem (missing
/// file, bad JSON, missing or ill-typed architecture field, missing or misshapen tensor)
/// is an InputError naming the file and the field.
HybridAxialMapper load_mapper(const std::string& path);

/// The mapper.json load_mapper(path) reads: architecture, training and the dataset it was
/// trained on (dataset.proxy, dataset.corpus with its span).
nlohmann::json read_mapper_manifest(const std::string& path);

/// The proxy a mapper was trained with (mapper.json dataset.proxy): a checkpoint folder, or the
/// target's own first `truncated_layers` layers.
struct MapperProxy {
  std::string folder;
  int truncated_layers = 0;
};
/// dataset.proxy of a manifest; InputError naming `mapper_path` when it names none.
MapperProxy mapper_proxy(const nlohmann::json& manifest, const std::string& mapper_path);
/// The features the mapper was trained on (dataset.features; log_mean_attention when the
/// file predates the choice); InputError naming `mapper_path` for an unknown kind.
MapperFeatures mapper_features(const nlohmann::json& manifest, const std::string& mapper_path);
/// The target the mapper was trained for (dataset.target.name), or "" when not recorded.
std::string mapper_target(const nlohmann::json& manifest);

/// InputError unless `config` takes `in_channels` proxy features and yields `targets`
/// target rows; `what` (e.g. the mapper's file) starts the message.
void check_mapper_fits(const MapperConfig& config, int in_channels, int targets,
                       const std::string& what);

}  // namespace kvshift::backend
