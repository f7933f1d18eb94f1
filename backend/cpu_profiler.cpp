// make_cpu_profiler(): times the real CPU ops on seeded random weights and
// inputs — prefill(T) (token replay; last-token logits), reconstruct(T, N) of
// the request's topology for N requests sharing the predictors, proxy_score(T)
// (proxy prefill with attention statistics + HybridAxialMapper) and prune(T, ρ)
// (top-K per KV head + compaction of the kept KV). Values do not change the
// work done, so caches are filled with random K/V instead of N prefills, and
// only the layers an op touches are allocated.
#include <fstream>
#include <random>
#include <thread>

#include "backend/model.hpp"
#include "backend/profiler.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/pruning.hpp"
#include "backend/reconstruct.hpp"
#include "backend/timing.hpp"

namespace kvshift::backend {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::vector<std::int32_t> random_tokens(std::int64_t n, int vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> d(0, vocab - 1);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

/// A cache whose `layers` hold T random rows; the others are empty.
KvCache random_cache(const cost_model::ModelSpec& m, const std::vector<int>& layers, std::int64_t T,
                     std::mt19937_64& rng) {
  const std::int64_t width = std::int64_t{m.kv_heads} * m.head_dim;
  KvCache c = KvCache::empty(m.layers, width);
  for (int l : layers) {
    c.k[l] = random_matrix(T, width, rng);
    c.v[l] = random_matrix(T, width, rng);
  }
  return c;
}

class CpuProfiler final : public Profiler {
 public:
  std::string backend_name() const override { return "cpu"; }
  std::string device_description() const override {
    return cpu_model_name() + " (" + std::to_string(std::thread::hardware_concurrency()) +
           " hardware threads, " + std::to_string(cpu_threads()) + " used)";
  }

  std::vector<OpTiming> run(const ProfileRequest& req) override {
    std::vector<OpTiming> rows;
    std::mt19937_64 rng(req.seed);
    const Model target(random_weights(req.model, req.seed));
    std::vector<GroupPredictor> predictors;
    std::vector<int> recon_layers;
    for (const auto& g : req.topology.groups()) {
      predictors.push_back(random_predictor(req.model, g, req.seed + g.group));
      recon_layers.insert(recon_layers.end(), g.anchor_layers.begin(), g.anchor_layers.end());
    }
    std::unique_ptr<Model> proxy;
    std::unique_ptr<HybridAxialMapper> mapper;
    if (req.proxy) {
      proxy = std::make_unique<Model>(random_weights(*req.proxy, req.seed + 1));
      mapper = std::make_unique<HybridAxialMapper>(
          req.mapper_path.empty() ? random_mapper_for(*req.proxy, req.model, req.seed + 2)
                                  : load_mapper(req.mapper_path));
      check_mapper_fits(mapper->config(), req.proxy->layers * req.proxy->q_heads,
                        req.model.layers * req.model.kv_heads, "--mapper " + req.mapper_path);
    }
    for (const std::int64_t T : req.tokens) {
      const auto tokens = random_tokens(T, req.model.vocab, rng);
      rows.push_back(time_op("prefill", T, 1, req.warmup, req.repeats, [&] {
        KvCache cache = target.new_cache();
        target.forward(tokens, cache, {.logits = LogitsMode::kLast});
      }));
      if (!predictors.empty()) time_reconstruct(req, T, predictors, recon_layers, rng, rows);
      if (proxy) {
        const auto proxy_tokens = random_tokens(T, req.proxy->vocab, rng);
        rows.push_back(time_op("proxy_score", T, 1, req.warmup, req.repeats,
                               [&] { proxykv_scores(*proxy, *mapper, proxy_tokens); }));
      }
      time_prune(req, T, rng, rows);
    }
    return rows;
  }

 private:
  void time_reconstruct(const ProfileRequest& req, std::int64_t T,
                        const std::vector<GroupPredictor>& predictors,
                        const std::vector<int>& layers, std::mt19937_64& rng,
                        std::vector<OpTiming>& rows) const {
    for (const std::int64_t N : req.sharing) {
      std::vector<KvCache> caches;
      for (std::int64_t i = 0; i < N; ++i)
        caches.push_back(random_cache(req.model, layers, T, rng));
      std::vector<KvCache*> ptrs;
      for (auto& c : caches) ptrs.push_back(&c);
      rows.push_back(time_op("reconstruct", T, N, req.warmup, req.repeats,
                             [&] { reconstruct(predictors, ptrs, req.model); }));
    }
  }

  void time_prune(const ProfileRequest& req, std::int64_t T, std::mt19937_64& rng,
                  std::vector<OpTiming>& rows) const {
    std::vector<int> all(req.model.layers);
    for (int l = 0; l < req.model.layers; ++l) all[l] = l;
    const KvCache cache = random_cache(req.model, all, T, rng);
    const Matrix scores = random_matrix(req.model.layers * req.model.kv_heads, T, rng);
    const KeepPolicy policy{.retention = req.retention};
    rows.push_back(time_op("prune", T, 1, req.warmup, req.repeats, [&] {
      const auto kept = top_k_per_head(scores, policy);
      const KvCache out = compact(cache, kept, req.model.kv_heads, req.model.head_dim);
      if (out.tokens() != keep_count(T, policy)) throw std::logic_error("prune: wrong size");
    }));
  }
};

}  // namespace

std::unique_ptr<Profiler> make_cpu_profiler() { return std::make_unique<CpuProfiler>(); }

}  // namespace kvshift::backend
