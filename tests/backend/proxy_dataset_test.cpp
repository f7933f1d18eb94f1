// The ProxyKV dataset on the tiny fixture model (2 layers; proxy = its first layer):
// shapes, features = the log-mean transform of the proxy's raw attention mass
// (recomputed here), labels = kvzip_scores of the same window or
// continuation_scores of the tokens after it, the manifest, determinism,
// truncate_layers and the repeat prompt file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/kvzip_prompt.hpp"
#include "backend/proxy_dataset.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/pruning.hpp"
#include "backend/safetensors.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

namespace fs = std::filesystem;

std::string tiny_folder() { return std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama"; }

const Model& tiny() {
  static const Model model(load_hf_model(tiny_folder()));
  return model;
}
const Model& tiny_proxy() {
  static const Model model(truncate_layers(load_hf_model(tiny_folder()), 1));
  return model;
}

std::vector<std::int32_t> corpus(int n) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 53 + i / 7) % 96);
  return t;
}

const std::vector<std::int32_t> kPrompt{5, 6, 7, 8};
constexpr std::int64_t kT = 20;

DatasetInfo info(std::uint64_t seed) {
  return {tiny_folder(),
          tiny_folder(),
          1,
          "data/x.tokens",
          200,
          0.1,
          0.9,
          kT,
          seed,
          {"\n\nRepeat the previous context exactly.\n", kPrompt}};
}

/// A tensor's raw bytes inside a safetensors image.
std::string raw(const std::string& image, const SafetensorsFile& f, const std::string& name) {
  std::uint64_t len = 0;
  std::memcpy(&len, image.data(), 8);
  const TensorInfo* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  return image.substr(8 + len + t->begin, t->end - t->begin);
}

SafetensorsFile open_image(const std::string& image) {
  return SafetensorsFile::from_bytes(
      std::span(reinterpret_cast<const std::uint8_t*>(image.data()), image.size()), "shard");
}

TEST(TruncateLayers, KeepsTheFirstKLayersBitIdentical) {
  const ModelWeights full = load_hf_model(tiny_folder());
  const ModelWeights cut = truncate_layers(full, 1);
  EXPECT_EQ(cut.spec.layers, 1);
  EXPECT_EQ(cut.spec.name, full.spec.name + "[:1]");
  ASSERT_EQ(cut.layers.size(), 1u);
  const LayerWeights &a = cut.layers[0], &b = full.layers[0];
  EXPECT_EQ(a.wq, b.wq);
  EXPECT_EQ(a.wk, b.wk);
  EXPECT_EQ(a.wv, b.wv);
  EXPECT_EQ(a.wo, b.wo);
  EXPECT_EQ(a.w_gate, b.w_gate);
  EXPECT_EQ(a.w_up, b.w_up);
  EXPECT_EQ(a.w_down, b.w_down);
  EXPECT_EQ(a.attn_norm, b.attn_norm);
  EXPECT_EQ(a.mlp_norm, b.mlp_norm);
  EXPECT_EQ(cut.embed, full.embed);
  // The truncated model's prefill is the full model's first layer: identical keys.
  KvCache c1 = Model(cut).new_cache(), c2 = Model(full).new_cache();
  const auto tokens = corpus(9);
  Model(cut).forward(tokens, c1, {.logits = LogitsMode::kNone});
  Model(full).forward(tokens, c2, {.logits = LogitsMode::kNone});
  EXPECT_EQ(c1.k[0], c2.k[0]);
}

TEST(TruncateLayers, RefusesKOutsideOneToLayersMinusOneNamingTheFlag) {
  const ModelWeights full = load_hf_model(tiny_folder());
  for (int k : {0, -1, 2, 3}) {
    try {
      truncate_layers(full, k);
      ADD_FAILURE() << "k = " << k << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--proxy-layers"), std::string::npos) << e.what();
    }
  }
}

TEST(ProxyWindow, FeaturesAreTheLogMeanOfTheProxysRawAttentionMass) {
  const auto tokens = corpus(kT);
  const ProxyWindow w = proxy_window(tiny_proxy(), tiny(), tokens, kPrompt);
  KvCache cache = tiny_proxy().new_cache();
  const ForwardResult r =
      tiny_proxy().forward(tokens, cache, {.logits = LogitsMode::kNone, .stats = {.mass = true}});
  const Matrix& mass = r.stats.mass;
  ASSERT_EQ(w.features.rows(), 1 * 4);
  ASSERT_EQ(w.features.cols(), kT);
  for (Eigen::Index c = 0; c < mass.rows(); ++c) {
    double row_sum = 0;
    for (Eigen::Index t = 0; t < kT; ++t) {
      row_sum += mass(c, t);
      const double want = std::log(double(mass(c, t)) / double(kT - t) + 1e-6);
      EXPECT_NEAR(w.features(c, t), want, 1e-5 * std::abs(want)) << c << "," << t;
    }
    EXPECT_NEAR(row_sum, double(kT), 1e-3);  // every query's weights sum to one
  }
  // One definition: the dataset's features are what the mapper gets at inference.
  EXPECT_EQ(proxy_features(tiny_proxy(), tokens, MapperFeatures::kLogMeanAttention), w.features);
}

TEST(ProxyWindow, LabelsAreKVZipScoresOfTheSameWindow) {
  const auto tokens = corpus(kT);
  const ProxyWindow w = proxy_window(tiny_proxy(), tiny(), tokens, kPrompt);
  KvCache cache = tiny().new_cache();
  tiny().forward(tokens, cache, {.logits = LogitsMode::kNone});
  const Matrix want = kvzip_scores(tiny(), tokens, cache, kPrompt);
  ASSERT_EQ(w.labels.rows(), 2 * 2);
  ASSERT_EQ(w.labels.cols(), kT);
  EXPECT_EQ(w.labels, want);
  EXPECT_GT(w.seconds.total, 0.0);
  EXPECT_GE(w.seconds.total, w.seconds.proxy_prefill + w.seconds.target_prefill);
}

TEST(ContinuationScores, AreTheGroupMaximumOfWhatTheNextQueriesPayEachKey) {
  const auto text = corpus(kT + 6);
  const auto window = std::span(text).first(kT);
  const auto next = std::span(text).subspan(kT, 6);
  KvCache cache = tiny().new_cache();
  tiny().forward(window, cache, {.logits = LogitsMode::kNone});
  const KvCache before = cache;
  const Matrix got = continuation_scores(tiny(), cache, next);
  // The cache is left as it was: the continuation's rows are dropped again.
  ASSERT_EQ(cache.tokens(), kT);
  for (int l = 0; l < 2; ++l) EXPECT_EQ(cache.k[l], before.k[l]) << l;
  // Recomputed: the whole text's per-query-head maxima, the continuation's queries only.
  KvCache fresh = tiny().new_cache();
  tiny().forward(window, fresh, {.logits = LogitsMode::kNone});
  const Matrix per_q =
      tiny().forward(next, fresh, {.logits = LogitsMode::kNone, .stats = {.max = true}}).stats.max;
  EXPECT_EQ(got, group_reduce(per_q.leftCols(kT), 4, 2, kernels::Reduce::kMax));
  ASSERT_EQ(got.rows(), 2 * 2);
  ASSERT_EQ(got.cols(), kT);
  EXPECT_GE(got.minCoeff(), 0.0f);
  EXPECT_LE(got.maxCoeff(), 1.0f);
  // One query's weights over the window and itself sum to one per query head: a KV head's
  // group of two query heads, maxed, sums to at most two over the window.
  const Matrix one = continuation_scores(tiny(), cache, next.first(1));
  for (Eigen::Index r = 0; r < one.rows(); ++r) {
    EXPECT_GT(one.row(r).sum(), 0.0f) << r;
    EXPECT_LE(one.row(r).sum(), 2.0f + 1e-5f) << r;
  }
  // Query-aware: another continuation reads the same window differently.
  const std::vector<std::int32_t> other{1, 2, 3, 4, 5, 6};
  EXPECT_NE(continuation_scores(tiny(), cache, other), got);
  EXPECT_THROW(continuation_scores(tiny(), cache, {}), std::invalid_argument);
}

TEST(ProxyWindow, ContinuationLabelsAreWhatTheFollowingTokensRead) {
  const auto text = corpus(kT + 5);
  const auto window = std::span(text).first(kT);
  const auto next = std::span(text).subspan(kT, 5);
  const ProxyWindow w =
      proxy_window(tiny_proxy(), tiny(), window, kPrompt, MapperFeatures::kLogMeanAttention,
                   Labels::kContinuationMax, next);
  KvCache cache = tiny().new_cache();
  tiny().forward(window, cache, {.logits = LogitsMode::kNone});
  EXPECT_EQ(w.labels, continuation_scores(tiny(), cache, next));
  // The features do not see the continuation: the same as with KVZip's labels.
  EXPECT_EQ(w.features, proxy_window(tiny_proxy(), tiny(), window, kPrompt).features);
  EXPECT_GT(w.seconds.label_pass, 0.0);
  // A continuation goes with continuation_max labels, and only with them.
  EXPECT_THROW(proxy_window(tiny_proxy(), tiny(), window, kPrompt,
                            MapperFeatures::kLogMeanAttention, Labels::kContinuationMax),
               std::invalid_argument);
  EXPECT_THROW(proxy_window(tiny_proxy(), tiny(), window, kPrompt,
                            MapperFeatures::kLogMeanAttention, Labels::kKvzipMax, next),
               std::invalid_argument);
}

TEST(Labels, NamesRoundTrip) {
  for (Labels l : {Labels::kKvzipMax, Labels::kContinuationMax}) {
    EXPECT_EQ(labels_of(labels_name(l)), l);
  }
  EXPECT_EQ(std::string(labels_name(Labels::kContinuationMax)), "continuation_max");
  EXPECT_FALSE(labels_of("continuation").has_value());
}

TEST(ProxyWindow, RepeatFeaturesOfATruncatedProxyHoldTheTargetsFirstLayersExactly) {
  // The proxy is the target's first layer, and a layer reads only the layers below it: KVZip's
  // repeat pass run on the proxy, reduced over each GQA group, is the target's label of that
  // layer bit for bit (log is monotonic, so the max commutes with it).
  const auto tokens = corpus(kT);
  const ProxyWindow w =
      proxy_window(tiny_proxy(), tiny(), tokens, kPrompt, MapperFeatures::kLogRepeatMax);
  ASSERT_EQ(w.features.rows(), 1 * 4);
  const Matrix reduced = group_reduce(w.features, 4, 2, kernels::Reduce::kMax);
  const Matrix first_layer = w.labels.topRows(2).unaryExpr([](float v) {
    return static_cast<float>(std::log(static_cast<double>(v) + kLogMeanAttentionEps));
  });
  EXPECT_EQ(reduced, first_layer);
  // The second layer is not the proxy's: its labels differ from anything the proxy computed.
  EXPECT_NE(w.labels.row(2), w.labels.row(0));
  // Without the prompt there is no repeat pass to run.
  EXPECT_THROW(proxy_features(tiny_proxy(), tokens, MapperFeatures::kLogRepeatMax),
               std::invalid_argument);
}

TEST(ProxyDataset, ShardsHoldFeaturesLabelsAndStartsOfEveryWindow) {
  const auto text = corpus(200);
  const std::vector<std::int64_t> starts{20, 60, 100};
  const ProxyDataset ds = build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(3));
  ASSERT_EQ(ds.shards.size(), 1u);
  const SafetensorsFile f = open_image(ds.shards[0]);
  const Matrix features = f.read("features", {3, 4, kT});  // [n, rows·T] as read
  const Matrix labels = f.read("labels", {3, 4, kT});
  ASSERT_EQ(f.find("starts")->dtype, "I64");
  ASSERT_EQ(f.find("starts")->shape, (std::vector<std::int64_t>{3}));
  const std::string s = raw(ds.shards[0], f, "starts");
  std::vector<std::int64_t> got(3);
  std::memcpy(got.data(), s.data(), 24);
  EXPECT_EQ(got, shuffled_starts(starts, 3));
  std::vector<std::int64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, starts);
  for (int i = 0; i < 3; ++i) {
    const auto window = std::span(text).subspan(got[i], kT);
    const ProxyWindow w = proxy_window(tiny_proxy(), tiny(), window, kPrompt);
    EXPECT_EQ(Eigen::Map<const Matrix>(features.row(i).data(), 4, kT), w.features) << i;
    EXPECT_EQ(Eigen::Map<const Matrix>(labels.row(i).data(), 4, kT), w.labels) << i;
  }
}

TEST(ProxyDataset, ManifestDescribesModelsCorpusPromptTimingsAndShards) {
  const auto text = corpus(200);
  const std::vector<std::int64_t> starts{0, 40, 80, 120};
  const nlohmann::json m =
      build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(1)).manifest;
  EXPECT_EQ(m["format"], "kvshift-proxykv-dataset");
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["target"]["layers"], 2);
  EXPECT_EQ(m["target"]["kv_heads"], 2);
  EXPECT_EQ(m["target"]["q_heads"], 4);
  EXPECT_EQ(m["target"]["folder"], tiny_folder());
  EXPECT_EQ(m["proxy"]["layers"], 1);
  EXPECT_EQ(m["proxy"]["q_heads"], 4);
  EXPECT_EQ(m["proxy"]["truncated_layers"], 1);
  EXPECT_EQ(m["proxy"]["name"], tiny().spec().name + "[:1]");
  EXPECT_EQ(m["in_channels"], 4);
  EXPECT_EQ(m["targets"], 4);
  EXPECT_EQ(m["window_tokens"], kT);
  EXPECT_EQ(m["features"], "log_mean_attention");
  EXPECT_EQ(m["labels"], "kvzip_max");
  EXPECT_TRUE(m["continuation_tokens"].is_null());
  EXPECT_EQ(m["corpus"]["file"], "x.tokens");
  EXPECT_EQ(m["corpus"]["path"], "data/x.tokens");
  EXPECT_EQ(m["corpus"]["tokens"], 200);
  EXPECT_EQ(m["corpus"]["span"], nlohmann::json({0.1, 0.9}));
  EXPECT_EQ(m["seed"], 1);
  EXPECT_EQ(m["kvzip_prompt"]["ids"], nlohmann::json(kPrompt));
  EXPECT_EQ(m["kvzip_prompt"]["text"], "\n\nRepeat the previous context exactly.\n");
  for (const char* k : {"proxy_prefill", "target_prefill", "kvzip_second_prefill", "per_window"}) {
    EXPECT_GT(m["timings_s"][k].get<double>(), 0.0) << k;
    EXPECT_LE(m["timings_s"][k].get<double>(), m["timings_s"]["total"].get<double>()) << k;
  }
  EXPECT_EQ(m["shards"],
            nlohmann::json::parse(R"([{"file": "shard-00000.safetensors", "windows": 4}])"));
  EXPECT_EQ(m.size(), 15u);  // no field beyond the documented ones
}

TEST(ProxyDataset, ContinuationLabelsReadTheTokensAfterEachWindowInsideTheCorpus) {
  const auto text = corpus(200);
  DatasetInfo ci = info(5);
  ci.labels = Labels::kContinuationMax;
  ci.continuation_tokens = 7;
  const std::vector<std::int64_t> starts{0, 60, 173};  // 173 + 20 + 7 = 200: the last fits
  const ProxyDataset ds = build_proxy_dataset(tiny_proxy(), tiny(), text, starts, ci);
  const SafetensorsFile f = open_image(ds.shards[0]);
  const Matrix labels = f.read("labels", {3, 4, kT});
  const std::vector<std::int64_t> order = shuffled_starts(starts, 5);
  for (int i = 0; i < 3; ++i) {
    const auto s = static_cast<std::size_t>(order[i]);
    const ProxyWindow w =
        proxy_window(tiny_proxy(), tiny(), std::span(text).subspan(s, kT), kPrompt,
                     MapperFeatures::kLogMeanAttention, Labels::kContinuationMax,
                     std::span(text).subspan(s + kT, 7));
    EXPECT_EQ(Eigen::Map<const Matrix>(labels.row(i).data(), 4, kT), w.labels) << i;
  }
  const nlohmann::json& m = ds.manifest;
  EXPECT_EQ(m["labels"], "continuation_max");
  EXPECT_EQ(m["continuation_tokens"], 7);
  EXPECT_GT(m["timings_s"]["continuation_pass"].get<double>(), 0.0);
  EXPECT_FALSE(m["timings_s"].contains("kvzip_second_prefill"));
  // A window whose continuation would run past the corpus is refused, not cut short.
  EXPECT_THROW(build_proxy_dataset(tiny_proxy(), tiny(), text, std::vector<std::int64_t>{174}, ci),
               std::invalid_argument);
  ci.continuation_tokens = 0;
  EXPECT_THROW(build_proxy_dataset(tiny_proxy(), tiny(), text, starts, ci), std::invalid_argument);
}

TEST(ProxyDataset, SixteenWindowsPerShard) {
  const auto text = corpus(400);
  std::vector<std::int64_t> starts;
  for (int i = 0; i < 18; ++i) starts.push_back(i * 21);
  const ProxyDataset ds =
      build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(2), {.window_threads = 2});
  ASSERT_EQ(ds.shards.size(), 2u);
  EXPECT_EQ(ds.manifest["shards"][0]["windows"], 16);
  EXPECT_EQ(ds.manifest["shards"][1]["file"], "shard-00001.safetensors");
  EXPECT_EQ(ds.manifest["shards"][1]["windows"], 2);
  EXPECT_EQ(open_image(ds.shards[1]).find("features")->shape,
            (std::vector<std::int64_t>{2, 4, kT}));
}

TEST(ProxyDataset, SameSeedGivesIdenticalBytesWhateverTheThreads) {
  const auto text = corpus(200);
  const std::vector<std::int64_t> starts{10, 50, 90, 130};
  const ProxyDataset a =
      build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(7), {.window_threads = 1});
  const ProxyDataset b =
      build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(7), {.window_threads = 2});
  EXPECT_EQ(a.shards, b.shards);
  nlohmann::json ma = a.manifest, mb = b.manifest;
  ma.erase("timings_s");
  mb.erase("timings_s");
  EXPECT_EQ(ma.dump(), mb.dump());
  const ProxyDataset c = build_proxy_dataset(tiny_proxy(), tiny(), text, starts, info(8));
  EXPECT_EQ(shuffled_starts(starts, 7), shuffled_starts(starts, 7));
  EXPECT_NE(shuffled_starts(starts, 7), shuffled_starts(starts, 8));
  EXPECT_NE(a.shards, c.shards);  // another order of the same windows
}

TEST(CheckProxyPair, RefusesAnotherVocabularyFamilyOrALargerProxy) {
  const cost_model::ModelSpec t = tiny().spec();
  EXPECT_NO_THROW(check_proxy_pair(tiny_proxy().spec(), t, "--proxy"));
  auto expect_refused = [&](cost_model::ModelSpec p, const std::string& what) {
    try {
      check_proxy_pair(p, t, "--proxy");
      ADD_FAILURE() << what << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--proxy: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  cost_model::ModelSpec vocab = tiny_proxy().spec();
  vocab.vocab = 97;
  expect_refused(vocab, "vocabulary");
  cost_model::ModelSpec bias = tiny_proxy().spec();
  bias.attention_bias = true;
  expect_refused(bias, "family");
  cost_model::ModelSpec larger = t;
  larger.layers = 3;
  expect_refused(larger, "larger");
}

TEST(KvzipPrompt, ReadsTheIdsAndSaysWhichCommandCreatesAMissingFile) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvshift-kvzip-prompt-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  try {
    kvzip_repeat_prompt(dir.string());
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tools/tokenize_prompt.py --model " + dir.string()),
              std::string::npos)
        << e.what();
  }
  std::ofstream(dir / "kvzip_prompt.json") << R"({"text": "\n\nRepeat.", "ids": [198, 198, 3]})";
  EXPECT_EQ(kvzip_repeat_prompt(dir.string()), (std::vector<std::int32_t>{198, 198, 3}));
  EXPECT_EQ(read_kvzip_prompt(dir.string()).text, "\n\nRepeat.");
  std::ofstream(dir / "kvzip_prompt.json") << R"({"text": "x", "ids": [1, -2]})";
  EXPECT_THROW(kvzip_repeat_prompt(dir.string()), InputError);
  std::ofstream(dir / "kvzip_prompt.json") << "not json";
  EXPECT_THROW(kvzip_repeat_prompt(dir.string()), InputError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshift::backend
