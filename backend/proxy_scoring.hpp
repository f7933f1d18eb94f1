// ProxyKV scoring, end to end: a small proxy model reads the context and emits,
// per proxy layer and query head, one number per key — the mapper's features,
// of the kind it was trained on (MapperFeatures): "log_mean_attention" (the log
// of the mean weight a key receives from the prefill's queries that can see it)
// or "log_repeat_max_attention" (KVZip's repeat pass run on the proxy: the log
// of the maximum weight over every query of the repeat pass, prompt included). The
// HybridAxialMapper turns them into target-aligned scores per target layer and
// KV head, ready for top_k_per_head. Training data (kvshift proxykv dataset)
// and inference share these definitions. Leaves out: running on a separate
// stream (the CPU backend is synchronous).
#pragma once

#include <cstdint>
#include <span>

#include "backend/model.hpp"
#include "backend/proxy_mapper.hpp"
#include "kernels/ops.hpp"

namespace kvshift::backend {

using kernels::kLogMeanAttentionEps;

/// "log_mean_attention" of a prefill's attention mass [rows, T] (mass[c, t] = Σ over the
/// queries of the weight key t receives; causal, so T − t queries see key t):
/// x[c, t] = log(mass[c, t] / (T − t) + kLogMeanAttentionEps), computed in double
/// (kernels::cpu::log_mean_attention).
Matrix log_mean_attention(const Matrix& mass);

/// The mapper's input X [proxy layers·q_heads, T] (row = layer·q_heads + head) of `kind`,
/// from the proxy's prefill of `tokens` on an empty cache, and for kLogRepeatMax its repeat
/// pass behind `repeat_prompt` (KVZip's prompt; unused otherwise):
/// x = log(repeat_max_attention + kLogMeanAttentionEps), computed in double.
Matrix proxy_features(const Model& proxy, std::span<const std::int32_t> tokens, MapperFeatures kind,
                      std::span<const std::int32_t> repeat_prompt = {});

/// Ŷ [target layers·kv_heads, T] = mapper(proxy_features(proxy, tokens, mapper's kind)).
Matrix proxykv_scores(const Model& proxy, const HybridAxialMapper& mapper,
                      std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> repeat_prompt = {});

/// A mapper shaped for (proxy, target) with seeded weights (timing, tests).
HybridAxialMapper random_mapper_for(const cost_model::ModelSpec& proxy,
                                    const cost_model::ModelSpec& target, std::uint64_t seed);

}  // namespace kvshift::backend
