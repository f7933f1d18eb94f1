// CUDA layout kernels of RISK-KV: the anchor gather (inverse RoPE on anchor
// keys, concatenation of [K_pre, V] per anchor into the GEMM input) and the
// fused bias + RoPE + scatter epilogue that writes predicted (or projected)
// K/V into the cache. Segments and anchors are the grid's y dimension.
//
// A block walks rows (request, token) with a grid stride; its threads cover a
// row's (head, rotation pair) items, several rows at once when a row has fewer
// items than threads, so the index arithmetic is 32-bit divisions once per
// item instead of 64-bit ones. RoPE angles come from a (cos, sin) table that
// a reconstruction fills once (fill_rope_table, in double like rope_cos_sin)
// and shares between its groups; without a table they are computed per item.
// Both give the same floats. Untested on a GPU since this rewrite (the
// conformance cases check it against the CPU twin on the first GPU run).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_layout.hpp"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;
using detail::ld;
using detail::st;

constexpr int kLayoutThreads = 256;
constexpr unsigned kMaxRowBlocks = 8192;

/// The table as kernels see it (cs null: compute per item).
struct Angles {
  const float2* cs;
  double theta;
  std::int64_t offset;
  /// Pair i of `half` at token t (a table is only passed for the caller's head_dim).
  __device__ void at(std::int64_t t, int i, int half, float* c, float* s) const {
    if (cs != nullptr) {
      const float2 v = cs[t * half + i];
      *c = v.x;
      *s = v.y;
    } else {
      rope_cos_sin(theta, offset + t, i, 2 * half, c, s);
    }
  }
};

/// How a block's threads cover rows of `items` items: `step` items per row slot, `rows_per`
/// row slots per block; thread -> (slot, first item).
struct RowCover {
  int step, rows_per, slot, item;
  __device__ explicit RowCover(int items) {
    step = items <= static_cast<int>(blockDim.x) ? items : static_cast<int>(blockDim.x);
    rows_per = static_cast<int>(blockDim.x) / step;
    slot = static_cast<int>(threadIdx.x) / step;
    item = static_cast<int>(threadIdx.x) % step;
  }
};

__global__ void rope_table_kernel(float2* cs, std::int64_t n, int half, double theta,
                                  std::int64_t offset) {
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    float c, s;
    rope_cos_sin(theta, offset + g / half, static_cast<int>(g % half), 2 * half, &c, &s);
    cs[g] = make_float2(c, s);
  }
}

struct Segments {
  DevView dst[EpilogueDesc::kMaxSegments];
  std::int64_t column[EpilogueDesc::kMaxSegments];
  bool rope[EpilogueDesc::kMaxSegments];
};

// ---- Epilogue: grid.y = segment ---------------------------------------------------------------
__global__ void __launch_bounds__(kLayoutThreads)
    bias_rope_scatter_kernel(DevView z, const float* bias, Segments segs, Angles angles) {
  const DevView& dst = segs.dst[blockIdx.y];
  const int tokens = static_cast<int>(dst.shape[1]), heads = static_cast<int>(dst.shape[2]);
  const int half = static_cast<int>(dst.shape[3] / 2), items = heads * half;
  const int rows = static_cast<int>(z.shape[0]);
  const std::int64_t column = segs.column[blockIdx.y];
  const bool rope = segs.rope[blockIdx.y];
  const RowCover cover(items);
  if (cover.slot >= cover.rows_per) return;
  for (int row = blockIdx.x * cover.rows_per + cover.slot; row < rows;
       row += gridDim.x * cover.rows_per) {
    const int r = row / tokens, t = row % tokens;
    const std::int64_t zrow = std::int64_t{row} * z.stride[0];
    const std::int64_t drow = r * dst.stride[0] + t * dst.stride[1];
    for (int p = cover.item; p < items; p += cover.step) {
      const int h = p / half, i = p % half;
      const std::int64_t col = column + h * 2 * half + i;
      float a = ld(z.data, zrow + col, z.dtype);
      float b = ld(z.data, zrow + col + half, z.dtype);
      if (bias != nullptr) {
        a += bias[col];
        b += bias[col + half];
      }
      if (rope) {
        float c, s;
        angles.at(t, i, half, &c, &s);
        const float ra = a * c - b * s, rb = b * c + a * s;
        a = ra;
        b = rb;
      }
      const std::int64_t o = drow + h * dst.stride[2] + i;
      st(dst.data, o, dst.dtype, a);
      st(dst.data, o + half, dst.dtype, b);
    }
  }
}

// ---- Anchor gather: grid.y = anchor -----------------------------------------------------------
struct Anchors {
  std::int64_t layer[8];
};

__global__ void __launch_bounds__(kLayoutThreads)
    anchor_gather_kernel(DevView cache, Anchors anchors, DevView x, Angles angles) {
  const int tokens = static_cast<int>(cache.shape[3]), heads = static_cast<int>(cache.shape[4]);
  const int hd = static_cast<int>(cache.shape[5]), half = hd / 2, items = heads * half;
  const std::int64_t width = std::int64_t{heads} * hd;
  const int rows = static_cast<int>(x.shape[0]);
  const std::int64_t layer = anchors.layer[blockIdx.y];
  const std::int64_t base = std::int64_t{blockIdx.y} * 2 * width;
  const RowCover cover(items);
  if (cover.slot >= cover.rows_per) return;
  for (int row = blockIdx.x * cover.rows_per + cover.slot; row < rows;
       row += gridDim.x * cover.rows_per) {
    const int r = row / tokens, t = row % tokens;
    const std::int64_t krow = r * cache.stride[0] + layer * cache.stride[1] + t * cache.stride[3];
    const std::int64_t xrow = std::int64_t{row} * x.stride[0] + base;
    for (int p = cover.item; p < items; p += cover.step) {
      const int h = p / half, i = p % half;
      const std::int64_t k0 = krow + h * cache.stride[4] + i, v0 = k0 + cache.stride[2];
      float c, s;
      angles.at(t, i, half, &c, &s);
      const float a = ld(cache.data, k0, cache.dtype), b = ld(cache.data, k0 + half, cache.dtype);
      const std::int64_t xo = xrow + std::int64_t{h} * hd + i;
      st(x.data, xo, x.dtype, a * c + b * s);  // rotate by -angle
      st(x.data, xo + half, x.dtype, b * c - a * s);
      st(x.data, xo + width, x.dtype, ld(cache.data, v0, cache.dtype));
      st(x.data, xo + width + half, x.dtype, ld(cache.data, v0 + half, cache.dtype));
    }
  }
}

/// Blocks for `rows` rows of `items` items each (grid-stride beyond kMaxRowBlocks).
unsigned row_blocks(std::int64_t rows, std::int64_t items) {
  const std::int64_t step = std::min<std::int64_t>(items, kLayoutThreads);
  const std::int64_t per = kLayoutThreads / step;
  return static_cast<unsigned>(std::min<std::int64_t>(detail::ceil_div(rows, per), kMaxRowBlocks));
}

Angles angles_of(const detail::RopeTable& table, std::int64_t tokens, std::int64_t hd, double theta,
                 std::int64_t offset) {
  const bool use = table.matches(tokens, hd, theta, offset);
  return {use ? static_cast<const float2*>(table.cs) : nullptr, theta, offset};
}

void require_int32_rows(const char* op, std::int64_t rows) {
  if (rows > INT32_MAX) throw std::invalid_argument(std::string(op) + ": more than 2^31 rows");
}

}  // namespace

namespace detail {

void fill_rope_table(const RopeTable& table, CUstream_st* stream) {
  const std::int64_t n = table.tokens * (table.head_dim / 2);
  if (n == 0) return;
  rope_table_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<float2*>(const_cast<void*>(table.cs)), n, table.head_dim / 2, table.theta,
      table.offset);
  KVSHIFT_LAUNCH_CHECK("rope_table_kernel");
}

void bias_rope_scatter(const EpilogueDesc& d, const RopeTable& table, CUstream_st* stream) {
  validate(d);
  require_device("bias_rope_scatter", Device::kCuda, {&d.z, &d.bias});
  require_int32_rows("bias_rope_scatter", d.z.shape[0]);
  Segments segs{};
  std::int64_t most = 0;
  for (std::size_t i = 0; i < d.segments.size(); ++i) {
    const EpilogueSegment& s = d.segments[i];
    require_device("bias_rope_scatter", Device::kCuda, {&s.dst});
    cpu_only(!s.head_norm.empty(), "bias_rope_scatter", "a per-head norm (QK norm)");
    if (s.dst.shape[3] % 2 != 0) {
      throw std::invalid_argument(
          "bias_rope_scatter: CUDA needs an even head_dim in every segment");
    }
    segs.dst[i] = dev(s.dst);
    segs.column[i] = s.column;
    segs.rope[i] = s.rope;
    most = std::max(most, s.dst.shape[2] * (s.dst.shape[3] / 2));
  }
  if (most == 0 || d.z.shape[0] == 0) return;
  // Angles are per (token, pair): a table serves the segments whose head_dim it was made for.
  const EpilogueSegment& first = d.segments.front();
  bool alike = true;  // one (tokens, head_dim) in every segment
  for (const EpilogueSegment& s : d.segments) {
    alike &= s.dst.shape[1] == first.dst.shape[1] && s.dst.shape[3] == first.dst.shape[3];
  }
  const Angles angles =
      alike ? angles_of(table, first.dst.shape[1], first.dst.shape[3], d.theta, d.position_offset)
            : Angles{nullptr, d.theta, d.position_offset};
  const dim3 grid(row_blocks(d.z.shape[0], most), static_cast<unsigned>(d.segments.size()));
  bias_rope_scatter_kernel<<<grid, kLayoutThreads, 0, stream>>>(
      dev(d.z), static_cast<const float*>(d.bias.data), segs, angles);
  KVSHIFT_LAUNCH_CHECK("bias_rope_scatter_kernel");
}

void anchor_gather(const AnchorGatherDesc& d, const RopeTable& table, CUstream_st* stream) {
  validate(d);
  require_device("anchor_gather", Device::kCuda, {&d.cache, &d.x});
  if (d.anchor_layers.size() > 8) throw std::invalid_argument("anchor_gather: at most 8 anchors");
  require_int32_rows("anchor_gather", d.x.shape[0]);
  Anchors anchors{};
  for (std::size_t i = 0; i < d.anchor_layers.size(); ++i) anchors.layer[i] = d.anchor_layers[i];
  const std::int64_t items = d.cache.shape[4] * (d.cache.shape[5] / 2);
  if (items == 0 || d.x.shape[0] == 0) return;
  const dim3 grid(row_blocks(d.x.shape[0], items), static_cast<unsigned>(d.anchor_layers.size()));
  anchor_gather_kernel<<<grid, kLayoutThreads, 0, stream>>>(
      dev(d.cache), anchors, dev(d.x),
      angles_of(table, d.cache.shape[3], d.cache.shape[5], d.theta, d.position_offset));
  KVSHIFT_LAUNCH_CHECK("anchor_gather_kernel");
}

}  // namespace detail

void bias_rope_scatter(const EpilogueDesc& d, CUstream_st* stream) {
  detail::bias_rope_scatter(d, detail::RopeTable{}, stream);
}

void anchor_gather(const AnchorGatherDesc& d, CUstream_st* stream) {
  detail::anchor_gather(d, detail::RopeTable{}, stream);
}

}  // namespace kvshift::kernels::cuda
