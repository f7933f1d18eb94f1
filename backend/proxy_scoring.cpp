// ProxyKV scoring; see proxy_scoring.hpp.
#include "backend/proxy_scoring.hpp"

#include <cmath>
#include <stdexcept>

#include "backend/pruning.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {

Matrix log_mean_attention(const Matrix& mass) {
  Matrix x(mass.rows(), mass.cols());
  kernels::cpu::log_mean_attention({matrix_view(mass), matrix_view(x)});
  return x;
}

Matrix proxy_features(const Model& proxy, std::span<const std::int32_t> tokens, MapperFeatures kind,
                      std::span<const std::int32_t> repeat_prompt) {
  KvCache cache = proxy.new_cache();
  const bool mean = kind == MapperFeatures::kLogMeanAttention;
  const ForwardResult r =
      proxy.forward(tokens, cache, {.logits = LogitsMode::kNone, .stats = {.mass = mean}});
  if (mean) return log_mean_attention(r.stats.mass);
  if (repeat_prompt.empty()) {
    throw std::invalid_argument("proxy_features: log_repeat_max_attention needs KVZip's prompt");
  }
  const Matrix max = repeat_max_attention(proxy, tokens, cache, repeat_prompt);
  return max.unaryExpr([](float v) {
    return static_cast<float>(std::log(static_cast<double>(v) + kLogMeanAttentionEps));
  });
}

Matrix proxykv_scores(const Model& proxy, const HybridAxialMapper& mapper,
                      std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> repeat_prompt) {
  return mapper.forward(proxy_features(proxy, tokens, mapper.config().features, repeat_prompt));
}

HybridAxialMapper random_mapper_for(const cost_model::ModelSpec& proxy,
                                    const cost_model::ModelSpec& target, std::uint64_t seed) {
  return HybridAxialMapper::random(
      {.in_channels = proxy.layers * proxy.q_heads, .targets = target.layers * target.kv_heads},
      seed);
}

}  // namespace kvshift::backend
