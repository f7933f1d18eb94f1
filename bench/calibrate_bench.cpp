// The calibration's inner loop on a SmolLM2-135M-shaped model (random weights):
// one quality probe re-run from a resume layer (512 history + 512 eval tokens),
// split into its parts, next to Eigen's SGEMM of the same shape as the LM head and
// the head with the NLL over it (whole, or in vocabulary blocks: head_nll); and four
// prefix passes (G4, +G11, +G8, +G6, random predictors) run straight (each from its
// first rebuilt layer) or as a PassChain.
// Counter GFLOP/s counts useful FLOPs. Run:
//   build/bench/calibrate_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <map>
#include <random>

#include "backend/calibrate/probe.hpp"
#include "backend/model.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"

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
    return RequestProbe(smollm2(), std::span(tokens).first(kHistory), std::span(tokens).last(kEval),
                        {});
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
                          2.0 * kEval * model.spec().hidden * model.spec().vocab) /
                             1e9,
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

void BM_HeadNll(benchmark::State& state) {
  const bool blocked = state.range(0) == 1;
  const auto& m = smollm2().spec();
  const ModelWeights& w = smollm2().weights();
  std::mt19937 rng(9);
  const Matrix x = Matrix::Random(kEval, m.hidden);
  std::vector<std::int32_t> targets(kEval);
  for (auto& t : targets) t = static_cast<std::int32_t>(rng() % m.vocab);
  for (auto _ : state) {
    const Matrix h = rms_norm(x, w.final_norm, w.spec.rms_eps);
    auto nll = blocked ? head_nll(h, w.output(), targets)
                       : next_token_nll(h * w.output().transpose(), targets);
    benchmark::DoNotOptimize(nll.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kEval * m.hidden * m.vocab / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

/// The predictors of the prefixes of G4, G11, G8, G6 (one per distinct group and anchors).
const std::vector<std::vector<const GroupPredictor*>>& prefixes() {
  static std::map<std::pair<int, std::vector<int>>, GroupPredictor> fitted;
  static const std::vector<std::vector<const GroupPredictor*>> out = [] {
    const auto& m = smollm2().spec();
    const std::vector<int> order = {4, 11, 8, 6};
    std::vector<std::vector<const GroupPredictor*>> o;
    for (std::size_t k = 1; k <= order.size(); ++k) {
      std::vector<const GroupPredictor*> ps;
      const std::vector<int> groups(order.begin(), order.begin() + static_cast<long>(k));
      const auto topo = cost_model::OmissionPlan::from_groups(m.layers, groups);
      for (const auto& plan : topo.groups()) {
        const auto key = std::make_pair(plan.group, plan.anchor_layers);
        if (!fitted.contains(key)) fitted.emplace(key, random_predictor(m, plan, plan.group));
        ps.push_back(&fitted.at(key));
      }
      o.push_back(ps);
    }
    return o;
  }();
  return out;
}

void BM_Prefixes(benchmark::State& state) {
  const bool chained = state.range(0) == 1;
  const RequestProbe& p = probe();
  std::vector<int> starts;
  for (int l = 2; l < smollm2().spec().layers - 2; l += 2) starts.push_back(l);
  for (auto _ : state) {
    PassChain chain(p, starts);
    for (const auto& ps : prefixes()) {
      auto nll = chained ? chain.nll(ps) : rebuilt_nll(p, ps);
      benchmark::DoNotOptimize(nll.data());
    }
  }
}

BENCHMARK(BM_ProbeEval)
    ->ArgName("resume")
    ->Arg(2)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LayerStep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HeadSgemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HeadNll)
    ->ArgName("blocked")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Prefixes)
    ->ArgName("chained")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kvshift::backend::calibrate

BENCHMARK_MAIN();
