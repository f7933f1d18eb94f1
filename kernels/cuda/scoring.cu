// CUDA twins of the KV-pruning score transforms (kernels/cpu/scoring.cpp):
// GQA group reduction, SnapKV's average pooling and ProxyKV's
// log_mean_attention. One thread per output element in a grid-stride loop,
// each summing in the CPU twin's order, so group_reduce and avg_pool match it
// bit for bit and log_mean_attention (double log) to rounding.
#include "kernels/cuda/common.cuh"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;

__device__ __forceinline__ float& at(const DevView& v, std::int64_t r, std::int64_t c) {
  return static_cast<float*>(v.data)[r * v.stride[0] + c];
}

__global__ void group_reduce_kernel(DevView in, DevView out, Reduce reduce) {
  const std::int64_t rows = out.shape[0], tokens = out.shape[1], group = in.shape[0] / rows;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < rows * tokens;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = g / tokens, t = g % tokens;
    float acc = at(in, r * group, t);
    for (std::int64_t i = 1; i < group; ++i) {
      const float v = at(in, r * group + i, t);
      acc = reduce == Reduce::kSum ? acc + v : fmaxf(acc, v);
    }
    at(out, r, t) = acc;
  }
}

__global__ void avg_pool_kernel(DevView in, DevView out, int kernel) {
  const std::int64_t rows = in.shape[0], tokens = in.shape[1], radius = kernel / 2;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < rows * tokens;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = g / tokens, t = g % tokens;
    const std::int64_t hi = min(tokens - 1, t + radius);
    float sum = 0;
    for (std::int64_t s = max(std::int64_t{0}, t - radius); s <= hi; ++s) sum += at(in, r, s);
    at(out, r, t) = sum / static_cast<float>(kernel);
  }
}

__global__ void log_mean_attention_kernel(DevView mass, DevView out, double eps) {
  const std::int64_t rows = mass.shape[0], tokens = mass.shape[1];
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < rows * tokens;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = g / tokens, t = g % tokens;
    const double mean = static_cast<double>(at(mass, r, t)) / static_cast<double>(tokens - t);
    at(out, r, t) = static_cast<float>(log(mean + eps));
  }
}

}  // namespace

void group_reduce(const GroupReduceDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("group_reduce", Device::kCuda, {&d.in, &d.out});
  const std::int64_t n = d.out.shape[0] * d.out.shape[1];
  if (n == 0) return;
  group_reduce_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.in), detail::dev(d.out), d.reduce);
  KVSHIFT_LAUNCH_CHECK("group_reduce_kernel");
}

void avg_pool(const AvgPoolDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("avg_pool", Device::kCuda, {&d.in, &d.out});
  const std::int64_t n = d.in.shape[0] * d.in.shape[1];
  if (n == 0) return;
  avg_pool_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.in), detail::dev(d.out), d.kernel);
  KVSHIFT_LAUNCH_CHECK("avg_pool_kernel");
}

void log_mean_attention(const LogMeanAttentionDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("log_mean_attention", Device::kCuda, {&d.mass, &d.out});
  const std::int64_t n = d.mass.shape[0] * d.mass.shape[1];
  if (n == 0) return;
  log_mean_attention_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.mass), detail::dev(d.out), d.eps);
  KVSHIFT_LAUNCH_CHECK("log_mean_attention_kernel");
}

}  // namespace kvshift::kernels::cuda
