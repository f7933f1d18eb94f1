// The calibration's inner loop on a SmolLM2-135M-shaped model (random weights):
// one quality probe re-run from a resume layer (512 history + 512 eval tokens),
// split into its parts, next to Eigen's SGEMM of the same shape as the LM head.
// Counter GFLOP/s counts useful FLOPs. Run:
//   build/bench/calibrate_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>

#include "backend/calibrate/probe.hpp"
#include "backend/model.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend::calibrate {
namespace {

constexpr std::int64_t kHistory = 512, kEval = 512;

const Model& smollm2() {
  static const Model model(random_weights(cost_model::find_model("smollm2-135m"), 1));
  return model;
}

const RequestProbe& probe() {
  static const RequestProbe p = [] {
    std::mt19937 rng(5);
    std::vector<std::int32_t> tokens(kHistory + kEval);
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % smollm2().spec().vocab);
    return RequestProbe(smollm2(), std::span(tokens).first(kHistory),
                        std::span(tokens).last(kEval), {});
  }();
  return p;
}

/// FLOPs of layers [first, L) over E rows after a history of H−1 cached rows, plus the head.
double eval_flops(const cost_model::ModelSpec& m, int first) {
  const double h = m.hidden, q = double(m.q_heads) * m.head_dim,
               kv = double(m.kv_heads) * m.head_dim, n = kEval;
  const double linear = 2.0 * n * (h * q + 2 * h * kv + q * h + 3 * h * m.intermediate);
  const double keys = (kHistory - 1) * n + n * (n + 1) / 2.0;
  const double attention = 2.0 * 2.0 * m.q_heads * m.head_dim * keys;
  return (m.layers - first) * (linear + attention) + 2.0 * n * h * m.vocab;
}

void BM_ProbeEval(benchmark::State& state) {
  const int first = static_cast<int>(state.range(0));
  const RequestProbe& p = probe();
  for (auto _ : state) {
    auto nll = p.nll_with(p.exact_cache(), first);
    benchmark::DoNotOptimize(nll.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(eval_flops(smollm2().spec(), first) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LayerStep(benchmark::State& state) {
  const Model& model = smollm2();
  const RequestProbe& p = probe();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const Matrix x0 = Matrix::NullaryExpr(kEval + 1, model.spec().hidden, [&] { return nd(rng); });
  for (auto _ : state) {
    state.PauseTiming();
    Matrix x = x0;
    KvCache cache = p.exact_cache();
    state.ResumeTiming();
    model.run_layers(10, 11, x, cache);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter((eval_flops(model.spec(), model.spec().layers - 1) -
                          2.0 * kEval * model.spec().hidden * model.spec().vocab) / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_HeadSgemm(benchmark::State& state) {
  const auto& m = smollm2().spec();
  const Matrix x = Matrix::Random(kEval, m.hidden);
  Matrix logits;
  for (auto _ : state) {
    logits.noalias() = x * smollm2().weights().output().transpose();
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kEval * m.hidden * m.vocab / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_ProbeEval)->ArgName("resume")->Arg(2)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LayerStep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HeadSgemm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kvshift::backend::calibrate

BENCHMARK_MAIN();
