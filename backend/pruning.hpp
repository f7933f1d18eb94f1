// Token pruning (ProxyKV and its baselines): per-key scores, top-K selection
// per KV head at a retention ratio with attention-sink and recent-window tokens
// always kept, and compaction of the kept KV. Scores are [layers·kv_heads, T]
// (row = layer·kv_heads + kv head); a GQA group's query heads are reduced onto
// their KV head. Baseline scores (papers.md §2–3):
//   H2O    — accumulated attention each key received from every query (sum).
//   SnapKV — attention from the last w queries, summed, then average-pooled
//            along tokens (kernel 5, same padding, zero-padded ends); the
//            observation window itself is kept by the recent window.
//   KVZip  — after prefill, the context is fed again behind a "repeat" prompt in
//            chunks; a key's score is the maximum over every query of the repeat
//            pass, prompt included, of the attention its GQA group pays it. Softmax
//            runs over the whole cache (the paper's reduced key set equals it when one
//            chunk covers the context).
// Leaves out: eviction during decoding (H2O's online form).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/model.hpp"
#include "backend/tensor.hpp"
#include "kernels/ops.hpp"

namespace kvshift::backend {

struct KeepPolicy {
  double retention = 0.3;  ///< ρ: share of tokens kept per head, in (0, 1]
  int sink_tokens = 4;     ///< the first tokens, always kept
  int recent_window = 32;  ///< the last tokens, always kept
};

/// How a retention ratio's budget is split over the KV heads: the same count for each
/// (top_k_per_head, then compact), or one budget over all of them (top_share_global, KVZip's
/// default, then mask_pruned), so that heads whose scores are high keep more.
enum class Budget : std::uint8_t { kPerHead, kGlobal };

/// "per-head" or "global".
const char* budget_name(Budget b);
/// The budget a name gives (budget_name's inverse); InputError naming `what` otherwise.
Budget parse_budget(const std::string& name, const std::string& what);

/// Tokens kept per head: max(round(ρ·T), forced tokens), at most T.
std::int64_t keep_count(std::int64_t tokens, const KeepPolicy& policy);

/// Kept token indices, ascending, per row of `scores` [heads, T]: the forced tokens plus
/// the highest-scoring others (ties to the earlier token); exactly keep_count(T) each.
std::vector<std::vector<std::int64_t>> top_k_per_head(const Matrix& scores,
                                                      const KeepPolicy& policy);

/// Non-uniform budget (KVZip's default): round(ρ·rows·T) entries kept across all rows,
/// forced tokens of every row first, then the globally highest scores.
std::vector<std::vector<std::int64_t>> top_share_global(const Matrix& scores,
                                                        const KeepPolicy& policy);

/// The kept token indices by `budget` (top_k_per_head or top_share_global).
std::vector<std::vector<std::int64_t>> select_kept(const Matrix& scores, const KeepPolicy& policy,
                                                   Budget budget);

/// Reduces per-query-head rows [layers·q_heads, T] onto KV heads [layers·kv_heads, T]
/// (kernels::cpu::group_reduce).
Matrix group_reduce(const Matrix& per_query_head, int q_heads, int kv_heads, kernels::Reduce how);

/// Keeps, for every layer and KV head, the tokens in kept[layer·kv_heads + head]
/// (equal counts per head): the returned cache has that many rows per layer, and counts the
/// dropped tokens in `evicted` so that tokens appended later keep their true positions.
KvCache compact(const KvCache& cache, const std::vector<std::vector<std::int64_t>>& kept,
                int kv_heads, int head_dim);

/// Keeps, for every layer and KV head, the tokens in kept[layer·kv_heads + head], any number
/// per head (top_share_global's non-uniform budget): every row stays, and the returned cache's
/// key mask drops the other tokens from that head's attention only.
KvCache mask_pruned(const KvCache& cache, const std::vector<std::vector<std::int64_t>>& kept,
                    int kv_heads);

/// H2O scores from a prefill's statistics.
Matrix h2o_scores(const AttentionStats& stats, const cost_model::ModelSpec& spec);
/// SnapKV scores from a prefill's statistics (stats.window = w), pooled with `pool_kernel`.
Matrix snapkv_scores(const AttentionStats& stats, const cost_model::ModelSpec& spec,
                     int pool_kernel = 5);
/// Average pooling along each row, odd kernel, same padding, zero-padded ends
/// (kernels::cpu::avg_pool).
Matrix avg_pool(const Matrix& x, int kernel);

/// KVZip's pass per query head [layers·q_heads, n_c]: the largest attention weight each of
/// the n_c context tokens held by `cache` (left unchanged) receives from any query of the
/// "repeat" input, where each chunk of `chunk` context tokens is fed as repeat_prompt + chunk
/// (from the 2nd chunk on, also the previous chunk's last 8 tokens before the chunk).
Matrix repeat_max_attention(const Model& model, std::span<const std::int32_t> context,
                            KvCache& cache, std::span<const std::int32_t> repeat_prompt,
                            std::int64_t chunk = 2048);

/// KVZip scores [layers·kv_heads, n_c]: repeat_max_attention, max over each GQA group.
Matrix kvzip_scores(const Model& model, std::span<const std::int32_t> context, KvCache& cache,
                    std::span<const std::int32_t> repeat_prompt, std::int64_t chunk = 2048);

/// What the text that follows reads [layers·kv_heads, n]: the largest attention weight each
/// of the n keys held by `cache` (left unchanged) receives from any query of `continuation`
/// fed after them, max over each GQA group. Query-aware where KVZip is not: an oracle at
/// inference (it needs the future), a training label for a mapper that predicts it.
Matrix continuation_scores(const Model& model, KvCache& cache,
                           std::span<const std::int32_t> continuation);

}  // namespace kvshift::backend
