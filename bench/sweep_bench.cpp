// Analytic sweep throughput: points per second of run_analytic over a
// bandwidth x context x omitted-groups grid, on 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "sweep/analytic_sweep.hpp"

namespace {

void BM_AnalyticSweep(benchmark::State& state) {
  kvshift::sweep::AnalyticSetup setup;
  setup.model = kvshift::cost_model::find_model("qwen2.5-1.5b");
  setup.gpu = kvshift::cost_model::find_gpu("h100");
  const kvshift::sweep::AnalyticGrid grid{
      kvshift::sweep::parse_bandwidth_grid("1Mbps..1Tbps:1000", "b"),
      kvshift::sweep::parse_token_grid("64..65536:100", "t"),
      {0, 2, 4, 6, 8}};
  std::uint64_t points = 0;
  for (auto _ : state) {
    const auto r =
        kvshift::sweep::run_analytic(setup, grid, static_cast<int>(state.range(0)), false);
    points += r.points;
    benchmark::DoNotOptimize(r.winners_csv.data());
  }
  state.counters["points/s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticSweep)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
