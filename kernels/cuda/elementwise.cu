// CUDA RMSNorm, RoPE, SwiGLU, embedding and seeded fill. Memory-bound kernels:
// one block per row (RMSNorm) or a grid-stride loop over elements; fp32 math.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;
using detail::ld;
using detail::st;

// ---- RMSNorm: one block per row -------------------------------------------------------------
__global__ void rms_norm_kernel(DevView x, DevView w, DevView out, float eps) {
  const std::int64_t row = blockIdx.x, dim = x.shape[1];
  const std::int64_t xb = row * x.stride[0], ob = row * out.stride[0];
  float sum = 0;
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = ld(x.data, xb + i, x.dtype);
    sum += v * v;
  }
  const float inv = rsqrtf(detail::block_sum(sum) / static_cast<float>(dim) + eps);
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = ld(x.data, xb + i, x.dtype) * inv;
    st(out.data, ob + i, out.dtype, v * ld(w.data, i * w.stride[0], w.dtype));
  }
}

// ---- RoPE: one thread per (token, head, pair) -----------------------------------------------
__global__ void rope_kernel(DevView x, DevView out, double theta, std::int64_t offset,
                            bool inverse) {
  const std::int64_t heads = x.shape[1], half = x.shape[2] / 2;
  const std::int64_t n = x.shape[0] * heads * half;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = g % half, h = (g / half) % heads, t = g / (half * heads);
    float c, s;
    rope_cos_sin(theta, offset + t, static_cast<int>(i), static_cast<int>(2 * half), &c, &s);
    if (inverse) s = -s;
    const std::int64_t xi = t * x.stride[0] + h * x.stride[1] + i;
    const std::int64_t oi = t * out.stride[0] + h * out.stride[1] + i;
    const float a = ld(x.data, xi, x.dtype), b = ld(x.data, xi + half, x.dtype);
    st(out.data, oi, out.dtype, a * c - b * s);
    st(out.data, oi + half, out.dtype, b * c + a * s);
  }
}

// ---- SwiGLU ---------------------------------------------------------------------------------
__global__ void swiglu_kernel(DevView gate, DevView up, DevView out) {
  const std::int64_t cols = gate.shape[1], n = gate.shape[0] * cols;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = g / cols, c = g % cols;
    const float a = ld(gate.data, r * gate.stride[0] + c, gate.dtype);
    const float b = ld(up.data, r * up.stride[0] + c, up.dtype);
    st(out.data, r * out.stride[0] + c, out.dtype, a / (1.0f + expf(-a)) * b);
  }
}

// ---- Embedding ------------------------------------------------------------------------------
__global__ void embed_kernel(DevView table, DevView ids, DevView out) {
  const std::int64_t dim = out.shape[1], n = out.shape[0] * dim, vocab = table.shape[0];
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = g / dim, i = g % dim;
    const std::int64_t id = static_cast<const std::int32_t*>(ids.data)[t * ids.stride[0]];
    const float v = (id >= 0 && id < vocab) ? ld(table.data, id * table.stride[0] + i, table.dtype)
                                            : __int_as_float(0x7FC00000);
    st(out.data, t * out.stride[0] + i, out.dtype, v);
  }
}

// ---- Seeded uniform fill --------------------------------------------------------------------
__global__ void fill_kernel(void* out, DType dtype, std::int64_t n, std::uint64_t seed, float lo,
                            float hi) {
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    st(out, g, dtype, uniform_value(seed, static_cast<std::uint64_t>(g), lo, hi));
  }
}

}  // namespace

void rms_norm(const RmsNormDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("rms_norm", Device::kCuda, {&d.x, &d.weight, &d.out});
  detail::cpu_only(d.accumulate, "rms_norm", "accumulate (a norm after a sublayer)");
  if (d.x.shape[0] == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(d.x.shape[0]), detail::kThreads, 0, stream>>>(
      detail::dev(d.x), detail::dev(d.weight), detail::dev(d.out), d.eps);
  KVSHIFT_LAUNCH_CHECK("rms_norm_kernel");
}

void rope(const RopeDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("rope", Device::kCuda, {&d.x, &d.out});
  const std::int64_t n = d.x.shape[0] * d.x.shape[1] * (d.x.shape[2] / 2);
  if (n == 0) return;
  rope_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.x), detail::dev(d.out), d.theta, d.position_offset, d.inverse);
  KVSHIFT_LAUNCH_CHECK("rope_kernel");
}

void swiglu(const SwigluDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("swiglu", Device::kCuda, {&d.gate, &d.up, &d.out});
  detail::cpu_only(d.act != SwigluDesc::Act::kSilu, "swiglu", "GELU gating");
  const std::int64_t n = d.gate.shape[0] * d.gate.shape[1];
  if (n == 0) return;
  swiglu_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.gate), detail::dev(d.up), detail::dev(d.out));
  KVSHIFT_LAUNCH_CHECK("swiglu_kernel");
}

void embed(const EmbedDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("embed", Device::kCuda, {&d.table, &d.ids, &d.out});
  const std::int64_t n = d.out.shape[0] * d.out.shape[1];
  if (n == 0) return;
  embed_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.table), detail::dev(d.ids), detail::dev(d.out));
  KVSHIFT_LAUNCH_CHECK("embed_kernel");
}

void fill_uniform(const FillDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("fill_uniform", Device::kCuda, {&d.out});
  const std::int64_t n = d.out.numel();
  if (n == 0) return;
  fill_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(d.out.data, d.out.dtype, n,
                                                                    d.seed, d.lo, d.hi);
  KVSHIFT_LAUNCH_CHECK("fill_kernel");
}

}  // namespace kvshift::kernels::cuda
