// `kvshift proxykv <sub-command>`: ProxyKV on real models. `dataset` builds the
// mapper's training data: evenly spread windows of a token corpus, the proxy's
// features (--features) and the target's labels (--labels) per window, written
// as manifest.json + shard-NNNNN.safetensors to a fresh folder (staged under a
// temporary name and renamed, only after the whole run succeeded). The group
// takes further sub-commands by adding an entry to kSubcommands.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_interrupt.hpp"
#include "apps/kvshift/support_progress.hpp"
#include "backend/calibrate/corpus.hpp"
#include "backend/kvzip_prompt.hpp"
#include "backend/proxy_dataset.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "kernels/cpu.hpp"
#include "reports/atomic_file.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;
namespace cal = backend::calibrate;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMinWindowTokens = 64;
constexpr int kMinWindows = 4;

struct DatasetCliOptions {
  std::string target, proxy, corpus, out;
  int proxy_layers = 8;
  int windows = 160;
  std::int64_t tokens = 1024;
  std::string span = "0:0.8";
  std::string seed = "1";
  std::string features = "log_mean_attention";
  std::string labels = "kvzip_max";
  std::int64_t continuation = 128;
  bool continuation_given = false;
  int threads = 0;
  bool force = false;
};

/// Runs `load`, prefixing an InputError's message with `flag` unless it already names it.
template <typename F>
auto naming(const std::string& flag, F&& load) {
  try {
    return load();
  } catch (const InputError& e) {
    const std::string what = e.what();
    throw InputError(what.rfind(flag, 0) == 0 ? what : flag + ": " + what);
  }
}

void check_sizes(const DatasetCliOptions& o) {
  if (o.tokens < kMinWindowTokens) {
    throw InputError("--tokens: a window needs at least " + std::to_string(kMinWindowTokens) +
                     " tokens (got " + std::to_string(o.tokens) + ")");
  }
  if (o.windows < kMinWindows) {
    throw InputError("--windows: a dataset needs at least " + std::to_string(kMinWindows) +
                     " windows (got " + std::to_string(o.windows) + ")");
  }
  if (o.continuation < 1) {
    throw InputError("--continuation: must be >= 1 token (got " + std::to_string(o.continuation) +
                     ")");
  }
  if (o.threads < 0) {
    throw InputError("--threads: must be >= 1 (got " + std::to_string(o.threads) + ")");
  }
}

/// Writes the shards and the manifest into `tmp`, renames it into place (a failure removes
/// it), and prints the per-window medians.
void publish_dataset(const backend::ProxyDataset& ds, const fs::path& tmp,
                     const DatasetCliOptions& o, const backend::DatasetInfo& info,
                     Clock::time_point build_start) {
  const fs::path out(o.out);
  try {
    for (std::size_t i = 0; i < ds.shards.size(); ++i) {
      reports::write_file_atomic(tmp / backend::shard_file_name(static_cast<int>(i)), ds.shards[i]);
    }
    reports::write_file_atomic(tmp / "manifest.json", ds.manifest.dump(2) + "\n");
    reports::publish_folder(tmp, out);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  const auto& ts = ds.manifest["timings_s"];
  const double build_s = std::chrono::duration<double>(Clock::now() - build_start).count();
  const bool kvzip = info.labels == backend::Labels::kKvzipMax;
  std::printf(
      "median per window: proxy %s %.2f s, target prefill %.2f s, %s %.2f s, window %.2f s; "
      "%.1f windows/min\n",
      info.features == backend::MapperFeatures::kLogRepeatMax ? "prefill + repeat pass" : "prefill",
      ts["proxy_prefill"].get<double>(), ts["target_prefill"].get<double>(),
      kvzip ? "KVZip second prefill" : "continuation pass",
      ts[kvzip ? "kvzip_second_prefill" : "continuation_pass"].get<double>(),
      ts["per_window"].get<double>(), 60.0 * o.windows / std::max(build_s, 1e-9));
  std::printf("wrote %s/{manifest.json, %zu shard(s)} in %.1f s\n", o.out.c_str(), ds.shards.size(),
              ts["total"].get<double>());
}

int run_dataset(const DatasetCliOptions& o, bool proxy_given) {
  const auto t0 = Clock::now();
  check_sizes(o);  // the cheap checks first, before loading a model
  const cal::CorpusSpan span = cal::parse_span(o.span, "--span");
  const auto features = backend::features_of(o.features);
  if (!features) {
    throw InputError("--features: \"" + o.features +
                     "\": expected log_mean_attention or log_repeat_max_attention");
  }
  const auto labels = backend::labels_of(o.labels);
  if (!labels) {
    throw InputError("--labels: \"" + o.labels + "\": expected kvzip_max or continuation_max");
  }
  const bool continuation_labels = *labels == backend::Labels::kContinuationMax;
  if (o.continuation_given && !continuation_labels) {
    throw InputError(
        "--continuation: only --labels continuation_max reads the tokens after a "
        "window (got --labels " +
        o.labels + ")");
  }
  const std::int64_t after = continuation_labels ? o.continuation : 0;
  const std::uint64_t seed = parse_seed(o.seed, "--seed");
  const fs::path out(o.out);
  const fs::path tmp = reports::staging_folder(out, o.force, {o.target, o.proxy, o.corpus});
  const InterruptCleanup on_interrupt(tmp);  // Ctrl-C leaves no half dataset behind

  const backend::Model target(naming("--target", [&] { return backend::load_hf_model(o.target); }));
  const backend::KvzipPrompt prompt =
      naming("--target", [&] { return backend::read_kvzip_prompt(o.target); });
  const backend::Model proxy = naming(proxy_given ? "--proxy" : "--proxy-layers", [&] {
    if (!proxy_given)
      return backend::Model(backend::truncate_layers(target.weights(), o.proxy_layers));
    backend::Model p(backend::load_hf_model(o.proxy));
    backend::check_proxy_pair(p.spec(), target.spec(), "--proxy");
    return p;
  });
  const std::vector<std::int32_t> tokens =
      naming("--corpus", [&] { return cal::read_tokens(o.corpus); });
  naming("--corpus", [&] {
    cal::check_vocabulary(tokens, target.spec().vocab, o.corpus, o.target);
    if (proxy_given) cal::check_vocabulary(tokens, proxy.spec().vocab, o.corpus, o.proxy);
    return 0;
  });
  // A continuation label reads the tokens after its window: they lie inside the span too.
  const std::vector<std::int64_t> starts =
      cal::spread_windows(std::ssize(tokens), span, o.tokens + after, o.windows);

  // Windows run in parallel, one core each (Eigen and the attention loops single-threaded).
  // Measured on the 2-core machine, 4 windows of 1,024 SmolLM2-135M tokens, proxy = first 8
  // layers: 2 windows at once 5.0 windows/min (38 s CPU), 1 window on 2 OpenMP threads
  // 3.0 windows/min (65 s CPU: the GEMM and per-head barriers spin instead of working).
  // The windows are independent; only the read-only weights are shared.
  const int cores = o.threads > 0
                        ? o.threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::cpu::set_threads(1);
  const backend::DatasetInfo info{o.target,
                                  proxy_given ? o.proxy : o.target,
                                  proxy_given ? std::nullopt : std::optional<int>(o.proxy_layers),
                                  o.corpus,
                                  std::ssize(tokens),
                                  span.begin,
                                  span.end,
                                  o.tokens,
                                  seed,
                                  prompt,
                                  *features,
                                  *labels,
                                  after};
  std::fprintf(stderr,
               "proxykv dataset: %d windows of %lld tokens; proxy %s (%d layers) -> target %s (%d "
               "layers); %d window(s) at a time\n",
               o.windows, static_cast<long long>(o.tokens), proxy.spec().name.c_str(),
               proxy.spec().layers, target.spec().name.c_str(), target.spec().layers, cores);
  const auto print = progress_printer("proxykv dataset");
  print("windows", 0, o.windows);  // the rate and ETA count from here
  const auto build_start = Clock::now();
  backend::ProxyDataset ds = backend::build_proxy_dataset(
      proxy, target, tokens, starts, info, {.window_threads = cores},
      [&print](std::int64_t done, std::int64_t total) { print("windows", done, total); });
  ds.manifest["timings_s"]["total"] = std::chrono::duration<double>(Clock::now() - t0).count();
  publish_dataset(ds, tmp, o, info, build_start);
  return 0;
}

Action setup_dataset(CLI::App& sub) {
  auto o = std::make_shared<DatasetCliOptions>();
  sub.add_option("--target", o->target,
                 "Target model folder (config.json, model.safetensors, kvzip_prompt.json)")
      ->required();
  auto* proxy = sub.add_option("--proxy", o->proxy,
                               "Proxy model folder: a smaller model of the same family and "
                               "vocabulary");
  auto* layers =
      sub.add_option("--proxy-layers", o->proxy_layers,
                     "Proxy = the target's first k layers (default 8; not with --proxy)");
  proxy->excludes(layers);
  sub.add_option("--corpus", o->corpus, "Token file (little-endian int32 ids)")->required();
  sub.add_option("--out", o->out, "Output folder (manifest.json, shard-NNNNN.safetensors)")
      ->required();
  sub.add_option("--windows", o->windows, "Windows (training examples), >= 4");
  sub.add_option("--tokens", o->tokens, "Tokens per window, >= 64");
  sub.add_option("--span", o->span, "Share A:B of the corpus the windows are spread over");
  sub.add_option("--seed", o->seed, "Seed of the window order over the shards");
  sub.add_option("--features", o->features,
                 "The proxy's features: log_mean_attention (its prefill's mean attention per "
                 "key) or log_repeat_max_attention (KVZip's repeat pass on the proxy)")
      ->capture_default_str();
  sub.add_option("--labels", o->labels,
                 "What the mapper learns: kvzip_max (KVZip's repeat-pass scores, query-agnostic) "
                 "or continuation_max (the largest attention each key gets from the --continuation "
                 "tokens that follow the window)")
      ->capture_default_str();
  auto* continuation =
      sub.add_option("--continuation", o->continuation,
                     "Tokens after each window whose queries give continuation_max labels, >= 1")
          ->capture_default_str();
  sub.add_option("--threads", o->threads, "Windows computed at once (default: all cores)");
  sub.add_flag("--force", o->force, "Replace an existing --out folder (atomically)");
  return [o, proxy, continuation] {
    o->continuation_given = continuation->count() > 0;
    return run_dataset(*o, proxy->count() > 0);
  };
}

struct Subcommand {
  const char* name;
  const char* description;
  std::function<Action(CLI::App&)> setup;
};

const Subcommand kSubcommands[] = {
    {"dataset", "Build the ProxyKV mapper's training data from a proxy and a target model",
     setup_dataset},
};

Action setup(CLI::App& group) {
  group.require_subcommand(1);
  auto actions = std::make_shared<std::vector<std::pair<CLI::App*, Action>>>();
  for (const Subcommand& s : kSubcommands) {
    CLI::App* sub = group.add_subcommand(s.name, s.description);
    actions->emplace_back(sub, s.setup(*sub));
  }
  return [actions] {
    for (auto& [sub, action] : *actions) {
      if (sub->parsed()) return action();
    }
    return 2;
  };
}

const RegisterCommand kRegister{
    {"proxykv", "ProxyKV on real models: build the mapper's training data (dataset)", 75, setup}};

}  // namespace
}  // namespace kvshift::app
