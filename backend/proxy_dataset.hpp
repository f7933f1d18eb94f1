// The ProxyKV mapper's training data, from real models: for each window of a
// token corpus, the proxy's features X = proxy_features of the chosen kind (per
// proxy layer·query head and key; MapperFeatures) and the target's labels Y of the
// chosen kind (per target layer·KV head and key; Labels): kvzip_scores (the maximum
// over every query of the repeat pass, prompt included, of the attention the KV
// head's group pays each key) or continuation_scores (the same maximum over the
// queries of the corpus tokens that follow the window), each op timed.
// The windows run in parallel on std::threads; the result is a manifest and
// shards of at most kWindowsPerShard windows ("features" F32 [n, in_channels, T],
// "labels" F32 [n, targets, T], "starts" I64 [n]) as bytes, for the caller to write.
// Choosing the windows (calibrate::spread_windows) and writing the folder are the
// CLI's (apps/kvshift/cmd_proxykv.cpp). Leaves out: the mapper's training itself.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/kvzip_prompt.hpp"
#include "backend/mapper_weights.hpp"
#include "backend/model.hpp"

namespace kvshift::backend {

/// Windows per shard file.
inline constexpr int kWindowsPerShard = 16;

/// What the mapper learns to predict.
///   kKvzipMax        "kvzip_max": kvzip_scores of the window, query-agnostic (the paper's).
///   kContinuationMax "continuation_max": continuation_scores of the next tokens of the
///                    corpus, what the text that follows the window actually reads.
enum class Labels : std::uint8_t { kKvzipMax, kContinuationMax };

const char* labels_name(Labels l);
/// The labels a name gives (labels_name's inverse), or none.
std::optional<Labels> labels_of(std::string_view text);

/// Wall seconds of one window's ops.
struct WindowTimings {
  double proxy_prefill = 0;   ///< the proxy's features: its pass(es) + the transform
  double target_prefill = 0;  ///< the target's prefill of the window
  /// The labels' pass on the target's cache: repeat prompt + window again (kvzip_max) or the
  /// continuation (continuation_max).
  double label_pass = 0;
  double total = 0;  ///< the whole window
};

/// One training example.
struct ProxyWindow {
  std::int64_t start = 0;  ///< first token in the corpus
  Matrix features;         ///< [proxy layers·q_heads, T]
  Matrix labels;           ///< [target layers·kv_heads, T]
  WindowTimings seconds;
};

/// Features and labels of `tokens` (one window): proxy_features(proxy, tokens, features,
/// repeat_prompt) and, on the target's prefill of tokens, kvzip_scores(…, repeat_prompt) or
/// continuation_scores(…, continuation) (the tokens that follow; needed for, and only for,
/// kContinuationMax: std::invalid_argument otherwise).
ProxyWindow proxy_window(const Model& proxy, const Model& target,
                         std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> repeat_prompt,
                         MapperFeatures features = MapperFeatures::kLogMeanAttention,
                         Labels labels = Labels::kKvzipMax,
                         std::span<const std::int32_t> continuation = {});

/// Checks that `proxy` can score for `target`: the same vocabulary (the same token ids mean
/// the same text), the same family (Qwen2-style q/k/v biases or none, like the target) and no
/// larger (per-token layer parameters). InputError naming `flag`.
void check_proxy_pair(const cost_model::ModelSpec& proxy, const cost_model::ModelSpec& target,
                      const std::string& flag);

/// What the manifest records besides the windows.
struct DatasetInfo {
  std::string target_folder;
  std::string proxy_folder;             ///< the target's folder for a truncated proxy
  std::optional<int> truncated_layers;  ///< --proxy-layers, or none for --proxy DIR
  std::string corpus_path;              ///< as given
  std::int64_t corpus_tokens = 0;
  double span_begin = 0, span_end = 1;
  std::int64_t window_tokens = 0;
  std::uint64_t seed = 0;
  KvzipPrompt prompt;
  MapperFeatures features = MapperFeatures::kLogMeanAttention;
  Labels labels = Labels::kKvzipMax;
  std::int64_t continuation_tokens = 0;  ///< tokens after each window (kContinuationMax only)
};

struct DatasetOptions {
  int window_threads = 1;  ///< windows computed at once (each with the backend's threads)
};

/// Called with (windows done, total) after each window, from the worker threads (serialised).
using DatasetProgress = std::function<void(std::int64_t done, std::int64_t total)>;

struct ProxyDataset {
  nlohmann::json manifest;          ///< manifest.json; timings_s.total is the build's wall time
  std::vector<std::string> shards;  ///< bytes of shard-00000.safetensors, …
};

/// The dataset of the windows of `corpus` starting at `starts` (each window_tokens long,
/// followed by continuation_tokens more for kContinuationMax), in the order a seeded shuffle of
/// `starts` (info.seed) gives them: shard i holds windows [16·i, 16·i + 16) of that order.
/// Deterministic for a given input: the shards' bytes and the manifest without timings_s do not
/// depend on the thread count.
ProxyDataset build_proxy_dataset(const Model& proxy, const Model& target,
                                 std::span<const std::int32_t> corpus,
                                 std::span<const std::int64_t> starts, const DatasetInfo& info,
                                 const DatasetOptions& options = {},
                                 const DatasetProgress& progress = {});

/// "shard-00000.safetensors".
std::string shard_file_name(int index);

/// The seeded order `starts` are visited in (a Fisher–Yates shuffle with mt19937_64(seed)).
std::vector<std::int64_t> shuffled_starts(std::span<const std::int64_t> starts, std::uint64_t seed);

}  // namespace kvshift::backend
