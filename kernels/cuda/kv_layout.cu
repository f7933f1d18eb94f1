// CUDA layout kernels of RISK-KV: the anchor gather (inverse RoPE on anchor
// keys, concatenation of [K_pre, V] per anchor into the GEMM input) and the
// fused bias + RoPE + scatter epilogue that writes predicted (or projected)
// K/V into the cache. One thread per (row, head, rotation pair); segments and
// anchors are the grid's y dimension.
#include "kernels/cuda/common.cuh"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;
using detail::ld;
using detail::st;

struct Segments {
  DevView dst[EpilogueDesc::kMaxSegments];
  std::int64_t column[EpilogueDesc::kMaxSegments];
  bool rope[EpilogueDesc::kMaxSegments];
};

// ---- Epilogue: grid.y = segment ---------------------------------------------------------------
__global__ void bias_rope_scatter_kernel(DevView z, const float* bias, Segments segs, double theta,
                                         std::int64_t offset) {
  const DevView& dst = segs.dst[blockIdx.y];
  const std::int64_t tokens = dst.shape[1], heads = dst.shape[2], half = dst.shape[3] / 2;
  const std::int64_t n = z.shape[0] * heads * half;
  const std::int64_t column = segs.column[blockIdx.y];
  const bool rope = segs.rope[blockIdx.y];
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = g % half, h = (g / half) % heads, row = g / (half * heads);
    const std::int64_t r = row / tokens, t = row % tokens;
    const std::int64_t col = column + h * 2 * half + i;
    float a = ld(z.data, row * z.stride[0] + col, z.dtype);
    float b = ld(z.data, row * z.stride[0] + col + half, z.dtype);
    if (bias != nullptr) {
      a += bias[col];
      b += bias[col + half];
    }
    if (rope) {
      float c, s;
      rope_cos_sin(theta, offset + t, static_cast<int>(i), static_cast<int>(2 * half), &c, &s);
      const float ra = a * c - b * s, rb = b * c + a * s;
      a = ra;
      b = rb;
    }
    const std::int64_t o = r * dst.stride[0] + t * dst.stride[1] + h * dst.stride[2] + i;
    st(dst.data, o, dst.dtype, a);
    st(dst.data, o + half, dst.dtype, b);
  }
}

// ---- Anchor gather: grid.y = anchor -----------------------------------------------------------
struct Anchors {
  std::int64_t layer[8];
};

__global__ void anchor_gather_kernel(DevView cache, Anchors anchors, DevView x, double theta,
                                     std::int64_t offset) {
  const std::int64_t tokens = cache.shape[3], heads = cache.shape[4], hd = cache.shape[5];
  const std::int64_t half = hd / 2, width = heads * hd;
  const std::int64_t n = x.shape[0] * heads * half;
  const std::int64_t layer = anchors.layer[blockIdx.y];
  const std::int64_t base = std::int64_t{blockIdx.y} * 2 * width;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = g % half, h = (g / half) % heads, row = g / (half * heads);
    const std::int64_t r = row / tokens, t = row % tokens;
    const std::int64_t k0 = r * cache.stride[0] + layer * cache.stride[1] + t * cache.stride[3] +
                            h * cache.stride[4] + i;
    const std::int64_t v0 = k0 + cache.stride[2];
    float c, s;
    rope_cos_sin(theta, offset + t, static_cast<int>(i), static_cast<int>(hd), &c, &s);
    const float a = ld(cache.data, k0, cache.dtype), b = ld(cache.data, k0 + half, cache.dtype);
    const std::int64_t xo = row * x.stride[0] + base + h * hd + i;
    st(x.data, xo, x.dtype, a * c + b * s);  // rotate by -angle
    st(x.data, xo + half, x.dtype, b * c - a * s);
    st(x.data, xo + width, x.dtype, ld(cache.data, v0, cache.dtype));
    st(x.data, xo + width + half, x.dtype, ld(cache.data, v0 + half, cache.dtype));
  }
}

}  // namespace

void bias_rope_scatter(const EpilogueDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("bias_rope_scatter", Device::kCuda, {&d.z, &d.bias});
  Segments segs{};
  std::int64_t most = 0;
  for (std::size_t i = 0; i < d.segments.size(); ++i) {
    const EpilogueSegment& s = d.segments[i];
    require_device("bias_rope_scatter", Device::kCuda, {&s.dst});
    if (s.dst.shape[3] % 2 != 0) {
      throw std::invalid_argument(
          "bias_rope_scatter: CUDA needs an even head_dim in every segment");
    }
    segs.dst[i] = detail::dev(s.dst);
    segs.column[i] = s.column;
    segs.rope[i] = s.rope;
    most = std::max(most, d.z.shape[0] * s.dst.shape[2] * (s.dst.shape[3] / 2));
  }
  if (most == 0) return;
  const dim3 grid(detail::grid_for(most) > 65535 ? 65535 : detail::grid_for(most),
                  static_cast<unsigned>(d.segments.size()));
  bias_rope_scatter_kernel<<<grid, detail::kThreads, 0, stream>>>(
      detail::dev(d.z), static_cast<const float*>(d.bias.data), segs, d.theta, d.position_offset);
  KVSHIFT_LAUNCH_CHECK("bias_rope_scatter_kernel");
}

void anchor_gather(const AnchorGatherDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("anchor_gather", Device::kCuda, {&d.cache, &d.x});
  if (d.anchor_layers.size() > 8) throw std::invalid_argument("anchor_gather: at most 8 anchors");
  Anchors anchors{};
  for (std::size_t i = 0; i < d.anchor_layers.size(); ++i) anchors.layer[i] = d.anchor_layers[i];
  const std::int64_t n = d.x.shape[0] * d.cache.shape[4] * (d.cache.shape[5] / 2);
  if (n == 0) return;
  const dim3 grid(detail::grid_for(n) > 65535 ? 65535 : detail::grid_for(n),
                  static_cast<unsigned>(d.anchor_layers.size()));
  anchor_gather_kernel<<<grid, detail::kThreads, 0, stream>>>(
      detail::dev(d.cache), anchors, detail::dev(d.x), d.theta, d.position_offset);
  KVSHIFT_LAUNCH_CHECK("anchor_gather_kernel");
}

}  // namespace kvshift::kernels::cuda
