// CUDA twins of the HybridAxialMapper's non-GEMM ops (kernels/cpu/mapper.cpp
// and cpu::window_attention); the dense parts run on cuBLAS (gemm_cublas.cpp).
//
// im2col, bias_act: one thread per element, grid-stride. layer_norm: one warp
// per row, mean then variance (two passes over the row, fp32 warp sums).
// window_attention: one warp per (query, head); lane j scores key lo + 32c + j,
// the warp keeps an online softmax (max, sum) and lane e accumulates output
// dims e, e + 32, ... (head_dim <= 256), as attention_kernel does.
// axial_head: one block per time t; the block stages x[:, t], the per-source
// logit term s[t, i] + c[t]·x[i, t] and the value vb[i] + vf·x[i, t] in shared
// memory, then each warp takes targets j and reduces over the sources.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;

constexpr int kWarps = 8;
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ float* row_of(const DevView& v, std::int64_t r) {
  return static_cast<float*>(v.data) + r * v.stride[0];
}

__global__ void im2col_kernel(DevView x, DevView cols, int kernel) {
  const std::int64_t channels = x.shape[0], tokens = x.shape[1], r = kernel / 2;
  const std::int64_t n = tokens * channels * kernel;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = g / (channels * kernel), ck = g % (channels * kernel);
    const std::int64_t c = ck / kernel, s = t + ck % kernel - r;
    row_of(cols, t)[ck] = s >= 0 && s < tokens ? row_of(x, c)[s] : 0.0f;
  }
}

__global__ void bias_act_kernel(DevView x, const float* bias, BiasActDesc::Act act,
                                bool positions) {
  const std::int64_t rows = x.shape[0], width = x.shape[1];
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < rows * width;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = g / width;
    const int i = static_cast<int>(g % width);
    float v = row_of(x, t)[i] + bias[i];
    if (act == BiasActDesc::Act::kGelu) v = gelu_erf(v);
    if (positions) v += sinusoidal_position(t, i, static_cast<int>(width));
    row_of(x, t)[i] = v;
  }
}

__global__ void __launch_bounds__(kWarps * 32)
    layer_norm_kernel(DevView x, const float* weight, const float* bias, DevView out, float eps) {
  const int lane = threadIdx.x & 31;
  const std::int64_t r = std::int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  const std::int64_t dim = x.shape[1];
  if (r >= x.shape[0]) return;  // warp-uniform
  const float* in = row_of(x, r);
  float sum = 0;
  for (std::int64_t i = lane; i < dim; i += 32) sum += in[i];
  const float mean = detail::warp_sum(sum) / static_cast<float>(dim);
  float sq = 0;
  for (std::int64_t i = lane; i < dim; i += 32) sq += (in[i] - mean) * (in[i] - mean);
  const float inv = rsqrtf(detail::warp_sum(sq) / static_cast<float>(dim) + eps);
  __syncwarp();  // every lane has read the row before any writes it (out may alias x)
  float* o = row_of(out, r);
  for (std::int64_t i = lane; i < dim; i += 32) o[i] = (in[i] - mean) * inv * weight[i] + bias[i];
}

struct WindowParams {
  DevView q, k, v, out;
  std::int64_t radius;
  float scale;
};

template <int kPer>  // output dims per lane: head_dim <= 32 * kPer
__global__ void __launch_bounds__(kWarps * 32) window_attention_kernel(WindowParams p) {
  constexpr int kMaxDim = 32 * kPer;
  __shared__ float qs[kWarps][kMaxDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t tokens = p.q.shape[0], heads = p.q.shape[1], hd = p.q.shape[2];
  const std::int64_t item = std::int64_t{blockIdx.x} * kWarps + warp;  // (t, h), h fastest
  if (item >= tokens * heads) return;                                  // warp-uniform
  const std::int64_t t = item / heads, h = item % heads;
  const float* q = static_cast<const float*>(p.q.data) + t * p.q.stride[0] + h * p.q.stride[1];
  for (std::int64_t e = lane; e < hd; e += 32) qs[warp][e] = q[e];
  __syncwarp();
  const std::int64_t lo = max(std::int64_t{0}, t - p.radius), hi = min(tokens - 1, t + p.radius);
  float m = kNegInf, l = 0, acc[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0;
  for (std::int64_t k0 = lo; k0 <= hi; k0 += 32) {
    const std::int64_t key = k0 + lane;
    const bool in = key <= hi;
    float s = kNegInf;
    if (in) {
      const float* k =
          static_cast<const float*>(p.k.data) + key * p.k.stride[0] + h * p.k.stride[1];
      float dot = 0;
      for (std::int64_t e = 0; e < hd; ++e) dot += qs[warp][e] * k[e];
      s = dot * p.scale;
    }
    const float m_new = fmaxf(m, detail::warp_max(s));
    const float correction = expf(m - m_new);
    const float pj = in ? expf(s - m_new) : 0.0f;
    l = l * correction + detail::warp_sum(pj);
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] *= correction;
    const int n = static_cast<int>(min(std::int64_t{32}, hi - k0 + 1));
    for (int j = 0; j < n; ++j) {
      const float pb = __shfl_sync(detail::kFullMask, pj, j);
      const float* v =
          static_cast<const float*>(p.v.data) + (k0 + j) * p.v.stride[0] + h * p.v.stride[1];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const std::int64_t e = lane + 32 * i;
        if (e < hd) acc[i] += pb * v[e];
      }
    }
    m = m_new;
  }
  float* out = static_cast<float*>(p.out.data) + t * p.out.stride[0] + h * p.out.stride[1];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const std::int64_t e = lane + 32 * i;
    if (e < hd) out[e] = acc[i] / l;
  }
}

struct HeadParams {
  DevView x, g, time_terms, y;
  const float* u;
  const float* vb;
  float vf, out_bias, scale;
};

__global__ void __launch_bounds__(kWarps * 32) axial_head_kernel(HeadParams p) {
  extern __shared__ float shared[];
  const std::int64_t sources = p.x.shape[0], targets = p.g.shape[0], t = blockIdx.x;
  float* xs = shared;              // [sources] x[i, t]
  float* base = shared + sources;  // [sources] s[t, i] + c[t]·x[i, t]
  float* value = base + sources;   // [sources] vb[i] + vf·x[i, t]
  const float* terms = row_of(p.time_terms, t);
  const float c = terms[sources], ve = terms[sources + 1];
  for (std::int64_t i = threadIdx.x; i < sources; i += blockDim.x) {
    const float x = row_of(p.x, i)[t];
    xs[i] = x;
    base[i] = terms[i] + c * x;
    value[i] = p.vb[i] + p.vf * x;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (std::int64_t j = warp; j < targets; j += kWarps) {
    const float* g = row_of(p.g, j);
    const float u = p.u[j];
    float m = kNegInf;
    for (std::int64_t i = lane; i < sources; i += 32)
      m = fmaxf(m, p.scale * (g[i] + u * xs[i] + base[i]));
    m = detail::warp_max(m);
    float sum = 0, acc = 0;
    for (std::int64_t i = lane; i < sources; i += 32) {
      const float w = expf(p.scale * (g[i] + u * xs[i] + base[i]) - m);
      sum += w;
      acc += w * value[i];
    }
    sum = detail::warp_sum(sum);
    acc = detail::warp_sum(acc);
    if (lane == 0) row_of(p.y, j)[t] = acc / sum + ve + p.out_bias;
  }
}

}  // namespace

void im2col(const Im2ColDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("im2col", Device::kCuda, {&d.x, &d.cols});
  const std::int64_t n = d.cols.shape[0] * d.cols.shape[1];
  if (n == 0) return;
  im2col_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.x), detail::dev(d.cols), d.kernel);
  KVSHIFT_LAUNCH_CHECK("im2col_kernel");
}

void bias_act(const BiasActDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("bias_act", Device::kCuda, {&d.x, &d.bias});
  const std::int64_t n = d.x.shape[0] * d.x.shape[1];
  if (n == 0) return;
  bias_act_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.x), static_cast<const float*>(d.bias.data), d.act, d.positions);
  KVSHIFT_LAUNCH_CHECK("bias_act_kernel");
}

void layer_norm(const LayerNormDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("layer_norm", Device::kCuda, {&d.x, &d.weight, &d.bias, &d.out});
  const std::int64_t rows = d.x.shape[0];
  if (rows == 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(detail::ceil_div(rows, kWarps)), kWarps * 32, 0,
                      stream>>>(detail::dev(d.x), static_cast<const float*>(d.weight.data),
                                static_cast<const float*>(d.bias.data), detail::dev(d.out), d.eps);
  KVSHIFT_LAUNCH_CHECK("layer_norm_kernel");
}

void window_attention(const WindowAttentionDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("window_attention", Device::kCuda, {&d.q, &d.k, &d.v, &d.out});
  const std::int64_t items = d.q.shape[0] * d.q.shape[1], hd = d.q.shape[2];
  if (items == 0) return;
  const WindowParams p{
      detail::dev(d.q), detail::dev(d.k),
      detail::dev(d.v), detail::dev(d.out),
      d.radius,         d.scale > 0 ? d.scale : 1.0f / std::sqrt(static_cast<float>(hd))};
  const auto grid = static_cast<unsigned>(detail::ceil_div(items, kWarps));
  if (hd <= 32) {
    window_attention_kernel<1><<<grid, kWarps * 32, 0, stream>>>(p);
  } else if (hd <= 64) {
    window_attention_kernel<2><<<grid, kWarps * 32, 0, stream>>>(p);
  } else if (hd <= 128) {
    window_attention_kernel<4><<<grid, kWarps * 32, 0, stream>>>(p);
  } else if (hd <= 256) {
    window_attention_kernel<8><<<grid, kWarps * 32, 0, stream>>>(p);
  } else {
    throw std::invalid_argument("window_attention: CUDA supports head_dim <= 256 (got " +
                                std::to_string(hd) + ")");
  }
  KVSHIFT_LAUNCH_CHECK("window_attention_kernel");
}

void axial_head(const AxialHeadDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("axial_head", Device::kCuda, {&d.x, &d.g, &d.u, &d.vb, &d.time_terms, &d.y});
  const std::int64_t sources = d.x.shape[0], tokens = d.x.shape[1];
  if (tokens == 0 || d.g.shape[0] == 0) return;
  const std::size_t shared = static_cast<std::size_t>(3 * sources) * sizeof(float);
  if (shared > 48 * 1024) {
    throw std::invalid_argument("axial_head: CUDA supports up to 4096 sources (got " +
                                std::to_string(sources) + ")");
  }
  const HeadParams p{detail::dev(d.x),
                     detail::dev(d.g),
                     detail::dev(d.time_terms),
                     detail::dev(d.y),
                     static_cast<const float*>(d.u.data),
                     static_cast<const float*>(d.vb.data),
                     d.vf,
                     d.out_bias,
                     d.scale};
  axial_head_kernel<<<static_cast<unsigned>(tokens), kWarps * 32, shared, stream>>>(p);
  KVSHIFT_LAUNCH_CHECK("axial_head_kernel");
}

}  // namespace kvshift::kernels::cuda
