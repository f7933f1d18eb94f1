// ProxyKV scoring; see proxy_scoring.hpp.
#include "backend/proxy_scoring.hpp"

namespace kvshift::backend {

Matrix proxy_attention_features(const Model& proxy, std::span<const std::int32_t> tokens) {
  KvCache cache = proxy.new_cache();
  ForwardResult r =
      proxy.forward(tokens, cache, {.logits = LogitsMode::kNone, .attention_stats = true});
  return std::move(r.stats.mass);
}

Matrix proxykv_scores(const Model& proxy, const HybridAxialMapper& mapper,
                      std::span<const std::int32_t> tokens) {
  return mapper.forward(proxy_attention_features(proxy, tokens));
}

HybridAxialMapper random_mapper_for(const cost_model::ModelSpec& proxy,
                                    const cost_model::ModelSpec& target, std::uint64_t seed) {
  return HybridAxialMapper::random(
      {.in_channels = proxy.layers * proxy.q_heads, .targets = target.layers * target.kv_heads},
      seed);
}

}  // namespace kvshift::backend
