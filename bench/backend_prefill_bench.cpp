// Prefill of a SmolLM2-135M-shaped model (random weights) at 512 tokens on the
// CPU backend, next to Eigen's own large SGEMM in the same process. The
// argument is the thread count. Counter GFLOP/s counts the useful FLOPs: the
// linear layers, causal attention (QKᵀ and PV over the lower triangle) and the
// last token's logits.
#include <benchmark/benchmark.h>

#include <random>

#include "backend/model.hpp"
#include "cost_model/model_spec.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

const Model& smollm2() {
  static const Model model(random_weights(cost_model::find_model("smollm2-135m"), 1));
  return model;
}

/// T seeded token ids of the model's vocabulary.
std::vector<std::int32_t> random_tokens(const Model& model, std::int64_t T) {
  std::mt19937 rng(3);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(T));
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % model.spec().vocab);
  return tokens;
}

double prefill_flops(const cost_model::ModelSpec& m, std::int64_t T) {
  const double h = m.hidden, q = double(m.q_heads) * m.head_dim,
               kv = double(m.kv_heads) * m.head_dim;
  const double linear = 2.0 * T * (h * q + 2 * h * kv + q * h + 3 * h * m.intermediate);
  const double attention = 2.0 * 2.0 * m.q_heads * m.head_dim * (T * (T + 1) / 2.0);
  return m.layers * (linear + attention) + 2.0 * h * m.vocab;
}

void BM_EigenSgemm(benchmark::State& state) {
  kernels::cpu::set_threads(static_cast<int>(state.range(0)));
  const Eigen::Index n = 2048;
  const Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n);
  Matrix c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_PrefillSmolLM2(benchmark::State& state) {
  kernels::cpu::set_threads(static_cast<int>(state.range(0)));
  const std::int64_t T = state.range(1);
  const Model& model = smollm2();
  const std::vector<std::int32_t> tokens = random_tokens(model, T);
  for (auto _ : state) {
    KvCache cache = model.new_cache();
    const ForwardResult r = model.forward(tokens, cache, {.logits = LogitsMode::kLast});
    benchmark::DoNotOptimize(r.logits.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(prefill_flops(model.spec(), T) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

/// The same prefill collecting the statistics `kvshift quality` asks of a history pass (mass for
/// H2O, window mass for SnapKV): each is one more attention_mass pass, the window's a short one.
void BM_PrefillSmolLM2Stats(benchmark::State& state) {
  kernels::cpu::set_threads(1);
  const std::int64_t T = state.range(0);
  const Model& model = smollm2();
  const std::vector<std::int32_t> tokens = random_tokens(model, T);
  for (auto _ : state) {
    KvCache cache = model.new_cache();
    const ForwardResult r = model.forward(
        tokens, cache, {.logits = LogitsMode::kLast, .stats = {.mass = true, .window_mass = true}});
    benchmark::DoNotOptimize(r.stats.mass.data());
  }
}

BENCHMARK(BM_EigenSgemm)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PrefillSmolLM2)
    ->ArgNames({"threads", "tokens"})
    ->Args({1, 512})
    ->Args({2, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PrefillSmolLM2Stats)
    ->ArgName("tokens")
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kvshift::backend

BENCHMARK_MAIN();
