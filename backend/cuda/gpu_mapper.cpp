// GpuMapper; see gpu_mapper.hpp. The op sequence is run_mapper's, dispatched to
// the CUDA kernels on the context's stream.
#include "backend/cuda/gpu_mapper.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/check.cuh"

namespace kvshift::backend::gpu {
namespace {

namespace kc = kernels::cuda;

/// run_mapper's ops on the CUDA kernels.
std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

}  // namespace

GpuMapper::GpuMapper(const MapperWeights& weights, std::int64_t max_tokens, const kc::Context& ctx)
    : prepared_(prepare_mapper(weights)), ctx_(ctx), max_tokens_(max_tokens) {
  if (max_tokens < 1) throw std::invalid_argument("GpuMapper: max_tokens must be >= 1");
  weights_ = prepared_.tensors.map([&](const HostTensor& t) {
    kc::DeviceBuffer& b = buffers_.emplace_back(t.values.size() * sizeof(float));
    b.upload(t.values.data(), t.values.size() * sizeof(float));
    return view_of(t.shape, b.data(), kernels::Device::kCuda);
  });
  std::vector<kernels::TensorView> views;
  for (const auto& shape : workspace_shapes(prepared_.config, max_tokens)) {
    kc::DeviceBuffer& b = buffers_.emplace_back(static_cast<std::size_t>(numel(shape)) * 4);
    views.push_back(view_of(shape, b.data(), kernels::Device::kCuda));
  }
  workspace_ = {views[0], views[1], views[2], views[3], views[4], views[5], views[6], views[7]};
}

kernels::TensorView GpuMapper::forward(const kernels::TensorView& features) {
  const MapperConfig& c = prepared_.config;
  if (features.rank != 2 || features.shape[0] != c.in_channels || features.shape[1] > max_tokens_) {
    throw std::invalid_argument("GpuMapper: features must be [" + std::to_string(c.in_channels) +
                                ", <= " + std::to_string(max_tokens_) + "] (got " +
                                features.describe() + ")");
  }
  return run_mapper(kc::Ops{ctx_}, prepared_, weights_, workspace_, features);
}

std::vector<float> GpuMapper::copy_scores(std::int64_t tokens) const {
  if (tokens < 0 || tokens > max_tokens_) throw std::invalid_argument("GpuMapper: bad token count");
  const std::int64_t targets = prepared_.config.targets;
  std::vector<float> out(static_cast<std::size_t>(targets * tokens));
  if (out.empty()) return out;
  KVSHIFT_CUDA_CHECK(cudaMemcpy2DAsync(
      out.data(), tokens * sizeof(float), workspace_.y.data, workspace_.y.stride[0] * sizeof(float),
      tokens * sizeof(float), targets, cudaMemcpyDeviceToHost, ctx_.stream()));
  ctx_.synchronize();
  return out;
}

}  // namespace kvshift::backend::gpu
