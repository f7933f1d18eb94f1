// GpuMapper: a trained HybridAxialMapper on the GPU, for ProxyKV's proxy_score.
// The weights are prepared on the host (mapper_program.hpp) and uploaded once,
// the workspaces are sized for the longest prefill, and forward() enqueues the
// whole op sequence on the context's stream (fp32 throughout: cuBLAS GEMMs with
// fp32 inputs and the kernels/ ops), so the scores stay on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/mapper_program.hpp"
#include "kernels/cuda.hpp"

namespace kvshift::backend::gpu {

class GpuMapper {
 public:
  /// Uploads `weights` (checked first) with workspaces for up to `max_tokens` tokens.
  GpuMapper(const MapperWeights& weights, std::int64_t max_tokens,
            const kernels::cuda::Context& ctx);
  GpuMapper(const GpuMapper&) = delete;
  GpuMapper& operator=(const GpuMapper&) = delete;

  const MapperConfig& config() const { return prepared_.config; }
  /// Enqueues the scores [targets, T] of features [in_channels, T] f32 on the device
  /// (T <= max_tokens); the view (row stride max_tokens) stays valid until the next call.
  kernels::TensorView forward(const kernels::TensorView& features);
  /// The last forward's scores [targets, tokens] row-major; waits for the stream.
  std::vector<float> copy_scores(std::int64_t tokens) const;

 private:
  PreparedMapper prepared_;
  const kernels::cuda::Context& ctx_;
  std::int64_t max_tokens_;
  std::vector<kernels::cuda::DeviceBuffer> buffers_;  // weights, then workspaces
  MapperTensors<kernels::TensorView> weights_;
  MapperWorkspace workspace_;
};

}  // namespace kvshift::backend::gpu
