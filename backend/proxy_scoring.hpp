// ProxyKV scoring, end to end: a small proxy model prefills the context and
// emits, per proxy layer and head, the attention mass each key receives; the
// HybridAxialMapper turns those features into target-aligned scores per target
// layer and KV head, ready for top_k_per_head. Leaves out: running on a
// separate stream (the CPU backend is synchronous).
#pragma once

#include <cstdint>
#include <span>

#include "backend/model.hpp"
#include "backend/proxy_mapper.hpp"

namespace kvshift::backend {

/// X [proxy layers·q_heads, T]: Σ over queries of the attention weight each key receives.
Matrix proxy_attention_features(const Model& proxy, std::span<const std::int32_t> tokens);

/// Ŷ [target layers·kv_heads, T] = mapper(proxy_attention_features(proxy, tokens)).
Matrix proxykv_scores(const Model& proxy, const HybridAxialMapper& mapper,
                      std::span<const std::int32_t> tokens);

/// A mapper shaped for (proxy, target) with seeded weights (timing, tests).
HybridAxialMapper random_mapper_for(const cost_model::ModelSpec& proxy,
                                    const cost_model::ModelSpec& target, std::uint64_t seed);

}  // namespace kvshift::backend
