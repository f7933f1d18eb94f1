// ProxyKV scoring, end to end: a small proxy model prefills the context and
// emits, per proxy layer and query head, the attention mass each key receives,
// transformed once, here, to "log_mean_attention" (the log of the mean weight a key
// receives from the queries that can see it); the HybridAxialMapper turns those
// features into target-aligned scores per target layer and KV head, ready for
// top_k_per_head. The mapper is trained on exactly these features (kvshift proxykv
// dataset), so training and inference share this one definition. Leaves out:
// running on a separate stream (the CPU backend is synchronous).
#pragma once

#include <cstdint>
#include <span>

#include "backend/model.hpp"
#include "backend/proxy_mapper.hpp"

namespace kvshift::backend {

/// Added to the mean weight before the log (a key nobody attends to: log(1e-6)).
inline constexpr double kLogMeanAttentionEps = 1e-6;

/// "log_mean_attention" of a prefill's attention mass [rows, T] (mass[c, t] = Σ over the
/// queries of the weight key t receives; causal, so T − t queries see key t):
/// x[c, t] = log(mass[c, t] / (T − t) + kLogMeanAttentionEps), computed in double.
Matrix log_mean_attention(const Matrix& mass);

/// The mapper's input X [proxy layers·q_heads, T]: log_mean_attention of the proxy's
/// prefill of `tokens` (an empty cache; row = layer·q_heads + head).
Matrix proxy_attention_features(const Model& proxy, std::span<const std::int32_t> tokens);

/// Ŷ [target layers·kv_heads, T] = mapper(proxy_attention_features(proxy, tokens)).
Matrix proxykv_scores(const Model& proxy, const HybridAxialMapper& mapper,
                      std::span<const std::int32_t> tokens);

/// A mapper shaped for (proxy, target) with seeded weights (timing, tests).
HybridAxialMapper random_mapper_for(const cost_model::ModelSpec& proxy,
                                    const cost_model::ModelSpec& target, std::uint64_t seed);

}  // namespace kvshift::backend
