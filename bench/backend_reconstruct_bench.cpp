// The RISK-KV reconstruction op on SmolLM2-135M shapes (w = 384; groups G2,G3:
// anchors = layers 0,1,6,7, 4 target layers) at 512 tokens for N requests
// sharing the predictors, single thread. GFLOP/s counts the GEMMs: 2·rows·A·D per group.
#include <benchmark/benchmark.h>

#include <random>

#include "backend/reconstruct.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

void BM_ReconstructSmolLM2(benchmark::State& state) {
  kernels::cpu::set_threads(1);
  const auto& m = cost_model::find_model("smollm2-135m");
  const auto topo = cost_model::OmissionPlan::from_groups(m.layers, {2, 3});
  const std::int64_t T = state.range(0), N = state.range(1);
  std::vector<GroupPredictor> preds;
  for (const auto& g : topo.groups()) preds.push_back(random_predictor(m, g, g.group));
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<KvCache> caches(N, KvCache::empty(m.layers, m.kv_width() / 2));
  for (auto& c : caches) {
    for (int l : {0, 1, 6, 7}) {
      c.k[l] = Matrix::NullaryExpr(T, m.kv_width() / 2, [&] { return d(rng); });
      c.v[l] = Matrix::NullaryExpr(T, m.kv_width() / 2, [&] { return d(rng); });
    }
  }
  std::vector<KvCache*> ptrs;
  for (auto& c : caches) ptrs.push_back(&c);
  for (auto _ : state) {
    reconstruct(preds, ptrs, m);
    benchmark::DoNotOptimize(caches[0].k[2].data());
  }
  double flops = 0;
  for (const auto& p : preds) flops += 2.0 * T * N * p.weight.rows() * p.weight.cols();
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_ReconstructSmolLM2)
    ->ArgNames({"tokens", "sharing"})
    ->Args({512, 1})
    ->Args({512, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kvshift::backend
