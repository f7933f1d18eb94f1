// ProxyKV training data; see proxy_dataset.hpp.
#include "backend/proxy_dataset.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "backend/parallel.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/pruning.hpp"
#include "backend/safetensors.hpp"
#include "backend/timing.hpp"
#include "cost_model/input_error.hpp"
#include "util/percentile.hpp"

namespace kvshift::backend {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string shard_image(std::span<const ProxyWindow> windows) {
  const auto n = static_cast<std::int64_t>(windows.size());
  const ProxyWindow& first = windows.front();
  RawTensor features{"features", "F32", {n, first.features.rows(), first.features.cols()}, {}};
  RawTensor labels{"labels", "F32", {n, first.labels.rows(), first.labels.cols()}, {}};
  RawTensor starts{"starts", "I64", {n}, {}};
  for (const ProxyWindow& w : windows) {
    // Matrix is row-major: [rows, T] rows follow each other, as [n, rows, T] wants.
    append_raw(features.bytes, w.features.data(), sizeof(float) * w.features.size());
    append_raw(labels.bytes, w.labels.data(), sizeof(float) * w.labels.size());
    append_raw(starts.bytes, &w.start, sizeof(std::int64_t));
  }
  return safetensors_image({features, labels, starts},
                           {{"format", "kvshift-proxykv-dataset"}, {"windows", std::to_string(n)}});
}

nlohmann::json manifest_json(const Model& proxy, const Model& target, const DatasetInfo& info,
                             const std::vector<ProxyWindow>& windows, double total_s) {
  const auto& t = target.spec();
  const auto& p = proxy.spec();
  std::vector<double> pp, tp, lp, all;
  for (const ProxyWindow& w : windows) {
    pp.push_back(w.seconds.proxy_prefill);
    tp.push_back(w.seconds.target_prefill);
    lp.push_back(w.seconds.label_pass);
    all.push_back(w.seconds.total);
  }
  for (auto* v : {&pp, &tp, &lp, &all}) std::sort(v->begin(), v->end());
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t i = 0; i < windows.size(); i += kWindowsPerShard) {
    shards.push_back({{"file", shard_file_name(static_cast<int>(i / kWindowsPerShard))},
                      {"windows", std::min<std::size_t>(kWindowsPerShard, windows.size() - i)}});
  }
  return {{"format", "kvshift-proxykv-dataset"},
          {"version", 1},
          {"target",
           {{"name", t.name},
            {"folder", info.target_folder},
            {"layers", t.layers},
            {"kv_heads", t.kv_heads},
            {"q_heads", t.q_heads}}},
          {"proxy",
           {{"name", p.name},
            {"folder", info.proxy_folder},
            {"layers", p.layers},
            {"q_heads", p.q_heads},
            {"truncated_layers",
             info.truncated_layers ? nlohmann::json(*info.truncated_layers) : nlohmann::json()}}},
          {"in_channels", p.layers * p.q_heads},
          {"targets", t.layers * t.kv_heads},
          {"window_tokens", info.window_tokens},
          {"features", features_name(info.features)},
          {"labels", labels_name(info.labels)},
          {"continuation_tokens", info.labels == Labels::kContinuationMax
                                      ? nlohmann::json(info.continuation_tokens)
                                      : nlohmann::json()},
          {"corpus",
           {{"file", std::filesystem::path(info.corpus_path).filename().string()},
            {"path", info.corpus_path},
            {"tokens", info.corpus_tokens},
            {"span", {info.span_begin, info.span_end}}}},
          {"seed", info.seed},
          {"kvzip_prompt", {{"text", info.prompt.text}, {"ids", info.prompt.ids}}},
          {"timings_s",
           {{"proxy_prefill", util::percentile(pp, 0.5)},
            {"target_prefill", util::percentile(tp, 0.5)},
            {info.labels == Labels::kKvzipMax ? "kvzip_second_prefill" : "continuation_pass",
             util::percentile(lp, 0.5)},
            {"per_window", util::percentile(all, 0.5)},
            {"total", total_s}}},
          {"shards", shards}};
}

}  // namespace

const char* labels_name(Labels l) {
  return l == Labels::kContinuationMax ? "continuation_max" : "kvzip_max";
}

std::optional<Labels> labels_of(std::string_view text) {
  for (Labels l : {Labels::kKvzipMax, Labels::kContinuationMax}) {
    if (text == labels_name(l)) return l;
  }
  return std::nullopt;
}

ProxyWindow proxy_window(const Model& proxy, const Model& target,
                         std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> repeat_prompt, MapperFeatures features,
                         Labels labels, std::span<const std::int32_t> continuation) {
  if ((labels == Labels::kContinuationMax) == continuation.empty()) {
    throw std::invalid_argument(
        "proxy_window: continuation_max labels need a continuation, "
        "and only they take one");
  }
  ProxyWindow w;
  const auto t0 = Clock::now();
  w.features = proxy_features(proxy, tokens, features, repeat_prompt);
  w.seconds.proxy_prefill = since(t0);
  const auto t1 = Clock::now();
  KvCache cache = target.new_cache();
  target.forward(tokens, cache, {.logits = LogitsMode::kNone});
  w.seconds.target_prefill = since(t1);
  const auto t2 = Clock::now();
  w.labels = labels == Labels::kKvzipMax ? kvzip_scores(target, tokens, cache, repeat_prompt)
                                         : continuation_scores(target, cache, continuation);
  w.seconds.label_pass = since(t2);
  w.seconds.total = since(t0);
  return w;
}

void check_proxy_pair(const cost_model::ModelSpec& proxy, const cost_model::ModelSpec& target,
                      const std::string& flag) {
  if (proxy.vocab != target.vocab) {
    throw InputError(flag + ": " + proxy.name + " has a " + std::to_string(proxy.vocab) +
                     "-token vocabulary, the target " + target.name + " " +
                     std::to_string(target.vocab) +
                     "; a proxy must share the target's tokenizer (same family)");
  }
  if (proxy.attention_bias != target.attention_bias) {
    throw InputError(flag + ": " + proxy.name + (proxy.attention_bias ? " has" : " has no") +
                     " q/k/v biases and the target " + target.name +
                     (target.attention_bias ? " has" : " has none") +
                     ": not the same model family");
  }
  if (proxy.layer_parameter_count() > target.layer_parameter_count()) {
    throw InputError(
        flag + ": " + proxy.name + " (" + std::to_string(proxy.layer_parameter_count()) +
        " layer parameters) is larger than the target " + target.name + " (" +
        std::to_string(target.layer_parameter_count()) + "); a proxy must be the cheaper model");
  }
}

std::string shard_file_name(int index) {
  char name[40];
  std::snprintf(name, sizeof name, "shard-%05d.safetensors", index);
  return name;
}

std::vector<std::int64_t> shuffled_starts(std::span<const std::int64_t> starts,
                                          std::uint64_t seed) {
  std::vector<std::int64_t> out(starts.begin(), starts.end());
  std::mt19937_64 rng(seed);
  for (std::size_t i = out.size(); i > 1; --i) {
    std::swap(out[i - 1], out[rng() % i]);  // spelled out: std::shuffle differs between libraries
  }
  return out;
}

ProxyDataset build_proxy_dataset(const Model& proxy, const Model& target,
                                 std::span<const std::int32_t> corpus,
                                 std::span<const std::int64_t> starts, const DatasetInfo& info,
                                 const DatasetOptions& options, const DatasetProgress& progress) {
  const auto t0 = Clock::now();
  const std::int64_t T = info.window_tokens;
  const std::int64_t C = info.labels == Labels::kContinuationMax ? info.continuation_tokens : 0;
  if (starts.empty() || T < 1) throw std::invalid_argument("build_proxy_dataset: no windows");
  if (info.labels == Labels::kContinuationMax && C < 1) {
    throw std::invalid_argument("build_proxy_dataset: continuation_max needs continuation tokens");
  }
  for (std::int64_t s : starts) {
    if (s < 0 || s + T + C > static_cast<std::int64_t>(corpus.size())) {
      throw std::invalid_argument("build_proxy_dataset: a window lies outside the corpus");
    }
  }
  const std::vector<std::int64_t> order = shuffled_starts(starts, info.seed);
  std::vector<ProxyWindow> windows(order.size());
  std::mutex progress_mutex;
  std::int64_t done = 0;
  parallel_for(order.size(), options.window_threads, [&](std::size_t i) {
    windows[i] = proxy_window(proxy, target, corpus.subspan(order[i], T), info.prompt.ids,
                              info.features, info.labels, corpus.subspan(order[i] + T, C));
    windows[i].start = order[i];
    const std::lock_guard lock(progress_mutex);
    ++done;
    if (progress) progress(done, std::ssize(order));
  });
  ProxyDataset out;
  for (std::size_t i = 0; i < windows.size(); i += kWindowsPerShard) {
    const std::size_t n = std::min<std::size_t>(kWindowsPerShard, windows.size() - i);
    out.shards.push_back(shard_image(std::span(windows).subspan(i, n)));
  }
  out.manifest = manifest_json(proxy, target, info, windows, since(t0));
  return out;
}

}  // namespace kvshift::backend
