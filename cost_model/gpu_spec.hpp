// GpuSpec: what the roofline estimate needs to know about a GPU. Presets hold
// vendor peak figures; the efficiency factors say how much of a peak real
// kernels reach and are the knobs a measured profile would replace.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cost_model/units.hpp"

namespace kvshift::cost_model {

struct GpuSpec {
  std::string name;
  FlopsPerSecond peak_dense_fp16;  ///< tensor-core peak, dense, fp16/bf16 in, fp32 accumulate
  BitsPerSecond hbm_bandwidth;     ///< device memory bandwidth
  Bytes hbm_capacity;
  BitsPerSecond host_link;            ///< host<->device (PCIe/NVLink-C2C) bandwidth
  Seconds launch_overhead{5e-6};      ///< per kernel launch
  double gemm_efficiency = 0.7;       ///< share of peak FLOP/s large GEMMs reach
  double attention_efficiency = 0.5;  ///< share of peak FLOP/s attention reaches
  double memory_efficiency = 0.8;     ///< share of HBM bandwidth streaming kernels reach
};

/// Throws InputError naming the first field out of range.
void validate(const GpuSpec& gpu);

/// Built-in presets: h200, h100, a100-80gb, l40s, rtx3060-laptop.
std::span<const GpuSpec> known_gpus();

/// Looks a preset up by name; the error lists the known names.
const GpuSpec& find_gpu(std::string_view name);

}  // namespace kvshift::cost_model
