// CUDA causal GQA attention (tiled, online softmax: memory O(T·head_dim), never
// T x T) and the attention-mass reduction ProxyKV scores with.
//
// attention_kernel: block = (16-query tile, query head), 8 warps x 2 rows. The
// block stages its scaled queries once, then walks 32-key tiles of K and V
// through shared memory; lane j scores key j (K rows padded by one float so the
// 32 lanes hit 32 banks), the warp keeps (max, sum, acc[head_dim/32]) per row,
// and P·V broadcasts each p_j with a shuffle. Keys past the tile's last query
// position are never loaded (causal skip).
//
// A key_mask (a pruning budget that differs per head) makes a dropped key
// invisible like a future one. bf16 inputs with aligned rows and no mask take
// the FlashAttention-2-style kernel in attention_fa2.cu instead (the WMMA one
// in attention_tc.cu stays callable as attention_wmma); attention_simt()
// forces this one.
//
// attention_mass_kernel: block = (32-key tile, query head); lane j owns key j,
// warps stride over the queries that can see the tile and add (or take the max
// of) exp(score - lse(query)); the 8 warps' partials combine in a fixed order.
#include <cmath>

#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;
using detail::ld;
using detail::st;

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 2;
constexpr int kQueryTile = kWarps * kRowsPerWarp;  // 16
constexpr int kKeyTile = 32;
constexpr float kNegInf = -INFINITY;

struct AttnParams {
  DevView q, k, v, out;
  float* lse;
  std::int64_t lse_stride0, lse_stride1;
  const std::int32_t* key_mask;  // null: every key counts
  std::int64_t mask_stride0, mask_stride1;
  int group;
  std::int64_t offset;  // kv_tokens - q_tokens
  float scale;
};

template <int HD>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttnParams p) {
  constexpr int kPer = HD / 32;
  __shared__ float qs[kQueryTile][HD];
  __shared__ float ks[kKeyTile][HD + 1];
  __shared__ float vs[kKeyTile][HD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t tq = p.q.shape[0], tk = p.k.shape[0];
  const std::int64_t h = blockIdx.y, kh = h / p.group;
  const std::int64_t q0 = std::int64_t{blockIdx.x} * kQueryTile;

  for (int idx = threadIdx.x; idx < kQueryTile * HD; idx += blockDim.x) {
    const int r = idx / HD, e = idx % HD;
    const std::int64_t qi = q0 + r;
    qs[r][e] = qi < tq
                   ? ld(p.q.data, qi * p.q.stride[0] + h * p.q.stride[1] + e, p.q.dtype) * p.scale
                   : 0.0f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = kNegInf;
    l[r] = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[r][i] = 0;
  }
  const std::int64_t q_last = min(tq, q0 + kQueryTile) - 1;
  const std::int64_t key_end = min(tk, p.offset + q_last + 1);  // keys [0, key_end) are visible

  for (std::int64_t k0 = 0; k0 < key_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile is consumed (and qs is staged on the first pass)
    for (int idx = threadIdx.x; idx < kKeyTile * HD; idx += blockDim.x) {
      const int j = idx / HD, e = idx % HD;
      const std::int64_t key = k0 + j;
      const bool in = key < tk;
      ks[j][e] = in ? ld(p.k.data, key * p.k.stride[0] + kh * p.k.stride[1] + e, p.k.dtype) : 0.0f;
      vs[j][e] = in ? ld(p.v.data, key * p.v.stride[0] + kh * p.v.stride[1] + e, p.v.dtype) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const std::int64_t qi = q0 + row;
      if (qi >= tq) continue;  // warp-uniform
      const std::int64_t key = k0 + lane;
      const bool visible =
          key <= p.offset + qi && key < tk &&
          (p.key_mask == nullptr || p.key_mask[key * p.mask_stride0 + kh * p.mask_stride1] != 0);
      float s = kNegInf;
      if (visible) {
        float dot = 0;
#pragma unroll 16
        for (int e = 0; e < HD; ++e) dot += qs[row][e] * ks[lane][e];
        s = dot;
      }
      const float tile_max = detail::warp_max(s);
      if (tile_max == kNegInf) continue;  // every key of this tile is in the future or masked
      const float m_new = fmaxf(m[r], tile_max);
      const float correction = expf(m[r] - m_new);
      const float pj = visible ? expf(s - m_new) : 0.0f;
      l[r] = l[r] * correction + detail::warp_sum(pj);
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[r][i] *= correction;
      for (int j = 0; j < kKeyTile; ++j) {
        const float pb = __shfl_sync(detail::kFullMask, pj, j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) acc[r][i] += pb * vs[j][lane + 32 * i];
      }
      m[r] = m_new;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= tq) continue;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;  // no visible key (all masked): 0
    const std::int64_t o = qi * p.out.stride[0] + h * p.out.stride[1];
#pragma unroll
    for (int i = 0; i < kPer; ++i) st(p.out.data, o + lane + 32 * i, p.out.dtype, acc[r][i] * inv);
    if (p.lse != nullptr && lane == 0) {
      p.lse[qi * p.lse_stride0 + h * p.lse_stride1] = m[r] + logf(l[r]);
    }
  }
}

struct MassParams {
  DevView q, k;
  const float* lse;
  std::int64_t lse_stride0, lse_stride1;
  float* out;
  std::int64_t out_stride0;
  int group;
  std::int64_t offset;
  std::int64_t query_begin;
  float scale;
  Reduce reduce;
};

template <int HD>
__global__ void __launch_bounds__(kWarps * 32) attention_mass_kernel(MassParams p) {
  __shared__ float ks[kKeyTile][HD + 1];
  __shared__ float qw[kWarps][HD];
  __shared__ float partial[kWarps][kKeyTile];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t tq = p.q.shape[0], tk = p.k.shape[0];
  const std::int64_t h = blockIdx.y, kh = h / p.group;
  const std::int64_t k0 = std::int64_t{blockIdx.x} * kKeyTile;
  for (int idx = threadIdx.x; idx < kKeyTile * HD; idx += blockDim.x) {
    const int j = idx / HD, e = idx % HD;
    const std::int64_t key = k0 + j;
    ks[j][e] =
        key < tk ? ld(p.k.data, key * p.k.stride[0] + kh * p.k.stride[1] + e, p.k.dtype) : 0.0f;
  }
  __syncthreads();
  const std::int64_t key = k0 + lane;
  // Query i sees keys <= offset + i, so the first query that sees key k0 is k0 - offset.
  const std::int64_t first = max(p.query_begin, max(std::int64_t{0}, k0 - p.offset));
  float acc = 0;
  for (std::int64_t i = first + warp; i < tq; i += kWarps) {
    for (int e = lane; e < HD; e += 32) {
      qw[warp][e] = ld(p.q.data, i * p.q.stride[0] + h * p.q.stride[1] + e, p.q.dtype) * p.scale;
    }
    __syncwarp();
    float dot = 0;
#pragma unroll 16
    for (int e = 0; e < HD; ++e) dot += qw[warp][e] * ks[lane][e];
    if (key < tk && key <= p.offset + i) {
      const float w = expf(dot - p.lse[i * p.lse_stride0 + h * p.lse_stride1]);
      acc = p.reduce == Reduce::kSum ? acc + w : fmaxf(acc, w);
    }
    __syncwarp();
  }
  partial[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && key < tk) {
    float total = 0;
    for (int w = 0; w < kWarps; ++w) {
      total = p.reduce == Reduce::kSum ? total + partial[w][lane] : fmaxf(total, partial[w][lane]);
    }
    p.out[h * p.out_stride0 + key] = total;
  }
}

float scale_of(float scale, std::int64_t head_dim) {
  return scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

[[noreturn]] void unsupported_head_dim(const char* op, std::int64_t hd) {
  throw std::invalid_argument(std::string(op) + ": CUDA supports head_dim 64 or 128 (got " +
                              std::to_string(hd) + ")");
}

}  // namespace

void attention_simt(const AttentionDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("attention", Device::kCuda, {&d.q, &d.k, &d.v, &d.out, &d.lse, &d.key_mask});
  const std::int64_t tq = d.q.shape[0], hq = d.q.shape[1], hd = d.q.shape[2];
  if (tq == 0) return;
  AttnParams p{detail::dev(d.q),
               detail::dev(d.k),
               detail::dev(d.v),
               detail::dev(d.out),
               static_cast<float*>(d.lse.data),
               d.lse.stride[0],
               d.lse.stride[1],
               static_cast<const std::int32_t*>(d.key_mask.data),
               d.key_mask.stride[0],
               d.key_mask.stride[1],
               static_cast<int>(hq / d.k.shape[1]),
               d.k.shape[0] - tq,
               scale_of(d.scale, hd)};
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(tq, kQueryTile)),
                  static_cast<unsigned>(hq));
  switch (hd) {
    case 64:
      attention_kernel<64><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    case 128:
      attention_kernel<128><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    default:
      unsupported_head_dim("attention", hd);
  }
  KVSHIFT_LAUNCH_CHECK("attention_kernel");
}

void attention(const AttentionDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("attention", Device::kCuda, {&d.q, &d.k, &d.v, &d.out, &d.lse, &d.key_mask});
  detail::cpu_only(d.window > 0, "attention", "a sliding window");
  if (d.q.shape[0] == 0) return;
  if (detail::attention_tc_applies(d)) {
    detail::attention_fa2(d, scale_of(d.scale, d.q.shape[2]), stream);
    return;
  }
  attention_simt(d, stream);
}

void attention_wmma(const AttentionDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("attention", Device::kCuda, {&d.q, &d.k, &d.v, &d.out, &d.lse, &d.key_mask});
  detail::cpu_only(d.window > 0, "attention_wmma", "a sliding window");
  if (d.q.shape[0] == 0) return;
  if (!detail::attention_tc_applies(d)) {
    throw std::invalid_argument(
        "attention_wmma: needs bf16 q, k, v with 16-byte aligned rows, head_dim 64 or 128 and "
        "no key mask");
  }
  detail::attention_tc(d, scale_of(d.scale, d.q.shape[2]), stream);
}

void attention_mass(const AttentionMassDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("attention_mass", Device::kCuda, {&d.q, &d.k, &d.lse, &d.out});
  detail::cpu_only(d.window > 0, "attention_mass", "a sliding window");
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1], hd = d.q.shape[2];
  if (tk == 0) return;
  MassParams p{detail::dev(d.q),
               detail::dev(d.k),
               static_cast<const float*>(d.lse.data),
               d.lse.stride[0],
               d.lse.stride[1],
               static_cast<float*>(d.out.data),
               d.out.stride[0],
               static_cast<int>(hq / d.k.shape[1]),
               tk - tq,
               d.query_begin,
               scale_of(d.scale, hd),
               d.reduce};
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(tk, kKeyTile)), static_cast<unsigned>(hq));
  switch (hd) {
    case 64:
      attention_mass_kernel<64><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    case 128:
      attention_mass_kernel<128><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    default:
      unsupported_head_dim("attention_mass", hd);
  }
  KVSHIFT_LAUNCH_CHECK("attention_mass_kernel");
}

}  // namespace kvshift::kernels::cuda
