// Peak figures are the vendors' datasheet numbers (dense, no sparsity). The
// efficiency factors are typical of well-tuned kernels on each part; they
// are estimates, and `kvshift profile` measures the real thing.
#include "cost_model/gpu_spec.hpp"

#include <array>
#include <cmath>

#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

constexpr double kGB = 1e9;
constexpr double kGiB = 1073741824.0;

GpuSpec make(std::string name, double tflops, double hbm_gbps_bytes, double hbm_gib,
             double host_gbps_bytes, double launch_us) {
  GpuSpec g;
  g.name = std::move(name);
  g.peak_dense_fp16 = {tflops * 1e12};
  g.hbm_bandwidth = {hbm_gbps_bytes * kGB * 8.0};
  g.hbm_capacity = {static_cast<std::int64_t>(hbm_gib * kGiB)};
  g.host_link = {host_gbps_bytes * kGB * 8.0};
  g.launch_overhead = {launch_us * 1e-6};
  return g;
}

const std::array<GpuSpec, 5>& presets() {
  //                         TFLOP/s  HBM GB/s  HBM GiB  host GB/s  launch µs
  static const std::array<GpuSpec, 5> gpus{
      make("h200", 989.4, 4800, 141 * 1e9 / kGiB, 55, 4),
      make("h100", 989.4, 3350, 80, 55, 4),
      make("a100-80gb", 312, 2039, 80, 25, 5),
      make("l40s", 362, 864, 48, 25, 5),
      make("rtx3060-laptop", 21.9, 336, 6, 12, 8),
  };
  return gpus;
}

}  // namespace

void validate(const GpuSpec& g) {
  auto positive = [&](double v, const char* field) {
    if (!(v > 0) || !std::isfinite(v)) {
      throw InputError("gpu " + g.name + ": " + field + " must be > 0");
    }
  };
  positive(g.peak_dense_fp16.value, "peak_dense_fp16");
  positive(g.hbm_bandwidth.value, "hbm_bandwidth");
  positive(static_cast<double>(g.hbm_capacity.count), "hbm_capacity");
  positive(g.host_link.value, "host_link");
  if (!(g.launch_overhead.value >= 0)) {
    throw InputError("gpu " + g.name + ": launch_overhead must be >= 0");
  }
  for (auto [v, field] : {std::pair{g.gemm_efficiency, "gemm_efficiency"},
                          std::pair{g.attention_efficiency, "attention_efficiency"},
                          std::pair{g.memory_efficiency, "memory_efficiency"}}) {
    if (!(v > 0 && v <= 1)) {
      throw InputError("gpu " + g.name + ": " + field + " must be in (0, 1] (got " +
                       std::to_string(v) + ")");
    }
  }
}

std::span<const GpuSpec> known_gpus() { return presets(); }

const GpuSpec& find_gpu(std::string_view name) {
  for (const GpuSpec& g : presets()) {
    if (g.name == name) return g;
  }
  std::string known;
  for (const GpuSpec& g : presets()) known += (known.empty() ? "" : ", ") + g.name;
  throw InputError("--gpu: unknown GPU \"" + std::string(name) + "\" (known: " + known +
                   "; or pass a GPU spec JSON file)");
}

}  // namespace kvshift::cost_model
