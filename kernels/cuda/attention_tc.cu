// WMMA tensor-core causal GQA attention for bf16 inputs (cuda::attention_wmma; the
// prefill path takes attention_fa2.cu now, this kernel stays as its baseline): the
// same online softmax as attention.cu's SIMT kernel, with Q·K^T and P·V on the
// tensor cores through WMMA (bf16 in, fp32 accumulate).
//
// Block = (64-query tile, query head), 4 warps x 16 query rows. Per 64-key
// tile: K and V are staged in shared memory with 16-byte loads; each warp
// computes S = Q K^T for its rows into shared memory, two lanes per row update
// (max, sum), rescale the row's fp32 output accumulator (kept in shared memory,
// since WMMA accumulator layouts are opaque) and write P in bf16; then the warp
// adds P·V into its accumulator. Scores are scaled in fp32 (never a rounded
// scaled Q), so the log-sum-exp matches the CPU twin to fp32 rounding; P is
// rounded to bf16 for the P·V product, as FlashAttention does.
#include <mma.h>

#include <cmath>

#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

namespace kvshift::kernels::cuda::detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTcWarps = 4;
constexpr int kTcQueries = 16 * kTcWarps;  // 64
constexpr int kTcKeys = 64;

/// Shared-memory layout (element strides padded; every sub-array starts 32-byte aligned).
template <int HD>
struct TcLayout {
  static constexpr int kLdh = HD + 8;       // bf16 rows of Q, K, V
  static constexpr int kLds = kTcKeys + 4;  // fp32 rows of S
  static constexpr int kLdp = kTcKeys + 8;  // bf16 rows of P
  static constexpr int kLdo = HD + 4;       // fp32 rows of O
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kTcQueries * kLdh * 2;
  static constexpr int kV = kK + kTcKeys * kLdh * 2;
  static constexpr int kS = kV + kTcKeys * kLdh * 2;
  static constexpr int kP = kS + kTcWarps * 16 * kLds * 4;
  static constexpr int kO = kP + kTcWarps * 16 * kLdp * 2;
  static constexpr int kBytes = kO + kTcWarps * 16 * kLdo * 4;
};

/// Copies `rows` rows of HD bf16 from global (row r at base + r * row_stride) into shared
/// memory with 16-byte vectors; rows at or past `valid` are zero.
template <int HD>
__device__ void stage_rows(__nv_bfloat16* dst, int ld, const __nv_bfloat16* base,
                           std::int64_t row_stride, int rows, std::int64_t valid) {
  constexpr int kVec = HD / 8;
  for (int idx = threadIdx.x; idx < rows * kVec; idx += blockDim.x) {
    const int r = idx / kVec, c = (idx % kVec) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < valid) v = *reinterpret_cast<const uint4*>(base + r * row_stride + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = v;
  }
}

template <int HD>
__global__ void __launch_bounds__(kTcWarps * 32) attention_tc_kernel(TcParams p) {
  using L = TcLayout<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  auto* ks = reinterpret_cast<__nv_bfloat16*>(smem + L::kK);
  auto* vs = reinterpret_cast<__nv_bfloat16*>(smem + L::kV);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* s_w = reinterpret_cast<float*>(smem + L::kS) + warp * 16 * L::kLds;
  __nv_bfloat16* p_w = reinterpret_cast<__nv_bfloat16*>(smem + L::kP) + warp * 16 * L::kLdp;
  float* o_w = reinterpret_cast<float*>(smem + L::kO) + warp * 16 * L::kLdo;

  const std::int64_t tq = p.tq, tk = p.tk, h = blockIdx.y, kh = h / p.group;
  const std::int64_t q0 = std::int64_t{blockIdx.x} * kTcQueries;
  stage_rows<HD>(qs, L::kLdh, p.q + q0 * p.q_stride0 + h * p.q_stride1, p.q_stride0, kTcQueries,
                 tq - q0);
  for (int i = lane; i < 16 * L::kLdo; i += 32) o_w[i] = 0.0f;

  // Lane pair (2r, 2r+1) owns row r of the warp: columns [half*32, half*32+32) of S and P,
  // and [half*HD/2, (half+1)*HD/2) of O.
  const int r = lane >> 1, half = lane & 1;
  const std::int64_t warp_q0 = q0 + warp * 16, qi = warp_q0 + r;
  const bool row_valid = qi < tq;
  const std::int64_t pos = p.offset + qi;
  float m = -INFINITY, l = 0.0f;
  const std::int64_t q_last = min(tq, q0 + kTcQueries) - 1;
  const std::int64_t key_end = min(tk, p.offset + q_last + 1);

  for (std::int64_t k0 = 0; k0 < key_end; k0 += kTcKeys) {
    __syncthreads();  // previous K/V consumed; Q staged on the first pass
    stage_rows<HD>(ks, L::kLdh, p.k + k0 * p.k_stride0 + kh * p.k_stride1, p.k_stride0, kTcKeys,
                   tk - k0);
    stage_rows<HD>(vs, L::kLdh, p.v + k0 * p.v_stride0 + kh * p.v_stride1, p.v_stride0, kTcKeys,
                   tk - k0);
    __syncthreads();
    if (warp_q0 >= tq || k0 > p.offset + warp_q0 + 15) continue;  // warp-uniform: nothing visible

      // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
#pragma unroll
    for (int nb = 0; nb < kTcKeys / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, qs + (warp * 16) * L::kLdh + kk * 16, L::kLdh);
        wmma::load_matrix_sync(b, ks + (nb * 16) * L::kLdh + kk * 16, L::kLdh);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(s_w + nb * 16, c, L::kLds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax update of row r (two lanes per row).
    float tile_max = -INFINITY;
    for (int j = 0; j < 32; ++j) {
      const int col = half * 32 + j;
      const std::int64_t key = k0 + col;
      if (row_valid && key <= pos && key < tk)
        tile_max = fmaxf(tile_max, s_w[r * L::kLds + col] * p.scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    const float correction = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float sum = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const int col = half * 32 + j;
      const std::int64_t key = k0 + col;
      float pj = 0.0f;
      if (row_valid && key <= pos && key < tk) pj = expf(s_w[r * L::kLds + col] * p.scale - m_new);
      sum += pj;
      p_w[r * L::kLdp + col] = __float2bfloat16_rn(pj);
    }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    l = l * correction + sum;
    m = m_new;
    for (int j = 0; j < HD / 2; ++j) o_w[r * L::kLdo + half * (HD / 2) + j] *= correction;
    __syncwarp();

    // O += P V.
#pragma unroll
    for (int nb = 0; nb < HD / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::load_matrix_sync(c, o_w + nb * 16, L::kLdo, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kTcKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, p_w + kk * 16, L::kLdp);
        wmma::load_matrix_sync(b, vs + (kk * 16) * L::kLdh + nb * 16, L::kLdh);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(o_w + nb * 16, c, L::kLdo, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (!row_valid) return;
  const float inv = 1.0f / l;
  const std::int64_t o = qi * p.out.stride[0] + h * p.out.stride[1] + half * (HD / 2);
  for (int j = 0; j < HD / 2; ++j)
    st(p.out.data, o + j, p.out.dtype, o_w[r * L::kLdo + half * (HD / 2) + j] * inv);
  if (p.lse != nullptr && half == 0) p.lse[qi * p.lse_stride0 + h * p.lse_stride1] = m + logf(l);
}

template <int HD>
void launch_tc(const TcParams& p, std::int64_t hq, CUstream_st* stream) {
  constexpr int kBytes = TcLayout<HD>::kBytes;
  static const bool configured = [] {
    KVSHIFT_CUDA_CHECK(cudaFuncSetAttribute(attention_tc_kernel<HD>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.tq, kTcQueries)), static_cast<unsigned>(hq));
  attention_tc_kernel<HD><<<grid, kTcWarps * 32, kBytes, stream>>>(p);
  KVSHIFT_LAUNCH_CHECK("attention_tc_kernel");
}

}  // namespace

bool attention_tc_applies(const AttentionDesc& d) {
  const auto aligned = [](const TensorView& v) {
    return v.dtype == DType::kBF16 && reinterpret_cast<std::uintptr_t>(v.data) % 16 == 0 &&
           v.stride[0] % 8 == 0 && v.stride[1] % 8 == 0;
  };
  const std::int64_t hd = d.q.shape[2];
  return (hd == 64 || hd == 128) && d.key_mask.empty() && aligned(d.q) && aligned(d.k) &&
         aligned(d.v);
}

TcParams tc_params(const AttentionDesc& d, float scale) {
  return TcParams{static_cast<const __nv_bfloat16*>(d.q.data),
                  static_cast<const __nv_bfloat16*>(d.k.data),
                  static_cast<const __nv_bfloat16*>(d.v.data),
                  d.q.stride[0],
                  d.q.stride[1],
                  d.k.stride[0],
                  d.k.stride[1],
                  d.v.stride[0],
                  d.v.stride[1],
                  dev(d.out),
                  static_cast<float*>(d.lse.data),
                  d.lse.stride[0],
                  d.lse.stride[1],
                  d.q.shape[0],
                  d.k.shape[0],
                  static_cast<int>(d.q.shape[1] / d.k.shape[1]),
                  d.k.shape[0] - d.q.shape[0],
                  scale};
}

void attention_tc(const AttentionDesc& d, float scale, CUstream_st* stream) {
  const TcParams p = tc_params(d, scale);
  if (d.q.shape[2] == 64) {
    launch_tc<64>(p, d.q.shape[1], stream);
  } else {
    launch_tc<128>(p, d.q.shape[1], stream);
  }
}

}  // namespace kvshift::kernels::cuda::detail
