// The HybridAxialMapper's sizes and tensors as plain data (Eigen, fp32): what
// the CPU mapper (proxy_mapper.hpp) computes with, and what the CUDA backend
// uploads. Header only, with no JSON or file access, so kvshift_backend_cuda
// (which does not link kvshift_backend) and the GPU-only build can include it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/tensor.hpp"

namespace kvshift::backend {

/// What the proxy hands the mapper, per proxy layer·query head and key (mapper.json
/// dataset.features; proxy_scoring.hpp computes both):
///   kLogMeanAttention   "log_mean_attention": its prefill's mean attention per key;
///   kLogRepeatMax       "log_repeat_max_attention": KVZip's repeat pass run on the proxy,
///                       the log of the maximum weight over every query of the repeat pass,
///                       prompt included, on each key
///                       (one more proxy pass, no target pass).
enum class MapperFeatures { kLogMeanAttention, kLogRepeatMax };

inline const char* features_name(MapperFeatures f) {
  return f == MapperFeatures::kLogRepeatMax ? "log_repeat_max_attention" : "log_mean_attention";
}

/// The kind named `text`, or none.
inline std::optional<MapperFeatures> features_of(std::string_view text) {
  for (MapperFeatures f : {MapperFeatures::kLogMeanAttention, MapperFeatures::kLogRepeatMax}) {
    if (text == features_name(f)) return f;
  }
  return std::nullopt;
}

struct MapperConfig {
  int in_channels = 0;  ///< proxy layers·heads
  int targets = 0;      ///< target layers·KV heads
  int width = 64;
  int layers = 2;    ///< encoder layers
  int heads = 4;     ///< encoder attention heads (width % heads == 0)
  int ffn = 128;     ///< encoder MLP inner width
  int kernel = 3;    ///< stem kernel (odd)
  int window = 128;  ///< encoder attention span (keys within ±window/2)
  MapperFeatures features = MapperFeatures::kLogMeanAttention;  ///< what it was trained on
};

/// One pre-LayerNorm encoder layer; linear weights are [out, in] (y = x·Wᵀ + b).
struct MapperEncoderLayer {
  Vector norm1_w, norm1_b, norm2_w, norm2_b;
  Matrix wq, wk, wv, wo, up, down;
  RowVector bq, bk, bv, bo, b_up, b_down;
};

/// Every tensor of a mapper (file names in proxy_mapper.cpp).
struct MapperWeights {
  MapperConfig config;
  Matrix stem_w;  // [width, in_channels·kernel]
  RowVector stem_b;
  std::vector<MapperEncoderLayer> encoder;
  Vector norm_w, norm_b;
  Matrix target_queries, source_embed, wq, wk, wv;  // [targets|in|width, width]
  RowVector feature_proj, out_w;
  float out_b = 0;
};

}  // namespace kvshift::backend
