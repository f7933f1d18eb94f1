// Cost-model evaluations per second: one full storage + latency record for
// the paper's Qwen2.5-1.5B configuration, as sweeps evaluate it.
// Target: >= 10 million evaluations per second on one core.
#include <benchmark/benchmark.h>

#include "cost_model/cost_record.hpp"

namespace {

using namespace kvshift::cost_model;

void BM_FullCostRecord(benchmark::State& state) {
  const ModelSpec& model = find_model("qwen2.5-1.5b");
  const OmissionPlan topology = OmissionPlan::parse("paper", model);
  const GpuSpec gpu = find_gpu("h200");
  const RooflineCosts compute(gpu);
  CostQuery q;
  q.model = &model;
  q.omission = &topology;
  q.gpu = &gpu;
  q.compute = &compute;
  double bps = 1e8;
  for (auto _ : state) {
    q.path = Path{{bps}, {0.01}};
    CostRecord r = evaluate(q);
    benchmark::DoNotOptimize(r);
    bps = bps < 1e11 ? bps * 1.01 : 1e8;  // vary the input so nothing is hoisted
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FullCostRecord)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
