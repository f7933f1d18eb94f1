// FlashAttention-2-style causal GQA prefill attention for bf16 on sm_80+ (built
// for sm_90): the kernel cuda::attention() takes for bf16 q/k/v with 16-byte
// aligned rows and no key mask. Untested on a GPU when written: the conformance
// cases compare it with the CPU twin on the first GPU run.
//
// Block = (64-query tile, query head), 4 warps x 16 query rows; the heaviest
// causal tiles (the last queries) are launched first. Q is staged once through
// shared memory into registers (A fragments); 64-key tiles of K and V stream
// through a two-stage cp.async pipeline (tile n+1 loads while tile n computes).
// Both products run on the tensor cores with mma.sync.m16n8k16 (bf16 in, fp32
// accumulate), operands read with ldmatrix (V transposed on the fly). The
// online softmax lives in registers: each thread holds 2 rows x 16 keys of S,
// row statistics reduce across the 4 lanes of a quad, and P goes from the S
// accumulators straight into A fragments (rounded to bf16, as FlashAttention
// does). Scores are scaled in fp32 (exp2 with log2(e) folded into the scale);
// the log-sum-exp is m·scale + log(l). Key tiles wholly above the diagonal are
// never loaded; only the diagonal tile and the ragged last tile are masked.
//
// Why mma.sync and not wgmma/TMA: this code was written on a machine without a
// GPU. mma.sync fragment layouts are documented per lane and checkable by hand;
// wgmma needs swizzled shared-memory descriptors and warpgroup-asynchronous
// accumulators, whose mistakes fail silently. FlashAttention-2 on Hopper with
// mma.sync reaches about a third of dense bf16 peak; a wgmma kernel is the next
// step once this one is measured (kernels/README.md).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

namespace kvshift::kernels::cuda::detail {
namespace {

constexpr int kFaWarps = 4;
constexpr int kFaQueries = 16 * kFaWarps;  // Br
constexpr int kFaKeys = 64;                // Bc
constexpr int kFaThreads = kFaWarps * 32;

/// Shared memory: Q [Br][HD+8], then two stages of K [Bc][HD+8] and V [Bc][HD+8] (bf16).
/// The 16-byte row padding makes the 8 row addresses of an ldmatrix hit 8 distinct bank groups.
template <int HD>
struct FaLayout {
  static constexpr int kLd = HD + 8;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kFaQueries * kLd;  // in elements
  static constexpr int kV = kK + 2 * kFaKeys * kLd;
  static constexpr int kElems = kV + 2 * kFaKeys * kLd;
  static constexpr int kBytes = kElems * 2;
  static constexpr int kStage = kFaKeys * kLd;
};

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16-byte asynchronous copy; src_bytes 0 writes zeros (rows past the end).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/// d += a (16x16 bf16, row) * b (16x8 bf16, col), fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo (the lower address)
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

/// Issues the cp.async copies of `rows` rows of HD bf16 (row r at base + r * stride) into
/// shared memory (row pitch FaLayout::kLd); rows at or past `valid` become zeros.
template <int HD>
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* base,
                                          std::int64_t stride, int rows, std::int64_t valid) {
  constexpr int kVec = HD / 8;
  for (int idx = threadIdx.x; idx < rows * kVec; idx += kFaThreads) {
    const int r = idx / kVec, c = (idx % kVec) * 8;
    const bool in = r < valid;
    cp_async16(dst + r * FaLayout<HD>::kLd + c, in ? base + r * stride + c : base, in ? 16 : 0);
  }
}

template <int HD>
__global__ void __launch_bounds__(kFaThreads) attention_fa2_kernel(TcParams p) {
  using L = FaLayout<HD>;
  constexpr int kDk = HD / 16;      // k-steps of Q K^T
  constexpr int kNs = kFaKeys / 8;  // n-tiles of S (8 keys each)
  constexpr int kNo = HD / 8;       // n-tiles of O (8 dims each)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;  // mma fragment row group and thread-in-group

  const std::int64_t tile = gridDim.x - 1 - blockIdx.x;  // heaviest causal tiles first
  const std::int64_t q0 = tile * kFaQueries, h = blockIdx.y, kh = h / p.group;
  const std::int64_t q_last = min(p.tq, q0 + kFaQueries) - 1;
  const std::int64_t key_end = min(p.tk, p.offset + q_last + 1);  // keys [0, key_end) visible
  const int n_tiles = key_end > 0 ? static_cast<int>((key_end + kFaKeys - 1) / kFaKeys) : 0;
  const __nv_bfloat16* kbase = p.k + kh * p.k_stride1;
  const __nv_bfloat16* vbase = p.v + kh * p.v_stride1;

  load_tile<HD>(smem + L::kQ, p.q + q0 * p.q_stride0 + h * p.q_stride1, p.q_stride0, kFaQueries,
                p.tq - q0);
  if (n_tiles > 0) {
    load_tile<HD>(smem + L::kK, kbase, p.k_stride0, kFaKeys, p.tk);
    load_tile<HD>(smem + L::kV, vbase, p.v_stride0, kFaKeys, p.tk);
  }
  cp_async_commit();

  float o[kNo][4];
#pragma unroll
  for (int j = 0; j < kNo; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8
  std::uint32_t qf[kDk][4];
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const std::int64_t row0 = q0 + warp * 16 + g;  // this thread's first row (second: + 8)

  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n & 1;
    if (n + 1 < n_tiles) {  // prefetch tile n + 1 into the other stage (consumed at n - 1)
      const std::int64_t k1 = std::int64_t{n + 1} * kFaKeys;
      const int other = (stage ^ 1) * L::kStage;
      load_tile<HD>(smem + L::kK + other, kbase + k1 * p.k_stride0, p.k_stride0, kFaKeys,
                    p.tk - k1);
      load_tile<HD>(smem + L::kV + other, vbase + k1 * p.v_stride0, p.v_stride0, kFaKeys,
                    p.tk - k1);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile n (and Q) landed
    __syncthreads();
    if (n == 0) {
#pragma unroll
      for (int kk = 0; kk < kDk; ++kk) {
        ldmatrix_x4(qf[kk],
                    smem + L::kQ + (warp * 16 + (lane & 15)) * L::kLd + kk * 16 + (lane >> 4) * 8);
      }
    }
    // A warp past the last query, or whose last row sees none of this tile's keys, sits it
    // out (it still syncs); a single query (decode) keeps one warp busy.
    if (q0 + warp * 16 >= p.tq || std::int64_t{n} * kFaKeys > p.offset + q0 + warp * 16 + 15) {
      __syncthreads();
      continue;
    }
    const __nv_bfloat16* ks = smem + L::kK + stage * L::kStage;
    const __nv_bfloat16* vs = smem + L::kV + stage * L::kStage;
    const std::int64_t k0 = std::int64_t{n} * kFaKeys;

    // S = Q K^T: 16 rows x 64 keys per warp; one ldmatrix.x4 gives B for two key n-tiles.
    float s[kNs][4];
#pragma unroll
    for (int j = 0; j < kNs; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDk; ++kk) {
#pragma unroll
      for (int j = 0; j < kNs; j += 2) {
        std::uint32_t b[4];
        ldmatrix_x4(b, ks + (j * 8 + (lane & 7) + ((lane >> 4) << 3)) * L::kLd + kk * 16 +
                           ((lane >> 3) & 1) * 8);
        mma_bf16(s[j], qf[kk], b[0], b[1]);
        mma_bf16(s[j + 1], qf[kk], b[2], b[3]);
      }
    }

    // Causal and ragged-end mask, only where the tile reaches past this warp's first row.
    if (k0 + kFaKeys > min(p.tk, p.offset + q0 + warp * 16 + 1)) {
#pragma unroll
      for (int j = 0; j < kNs; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t key = k0 + j * 8 + 2 * t4 + (e & 1);
          const std::int64_t row = row0 + (e >> 1) * 8;
          if (key > p.offset + row || key >= p.tk) s[j][e] = -INFINITY;
        }
      }
    }

    // Online softmax of rows g (e = 0, 1) and g + 8 (e = 2, 3), reduced over the quad.
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < kNs; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float base = mx == -INFINITY ? 0.0f : mx * scale_log2;  // a row that sees nothing yet
      corr[r] = m[r] == -INFINITY ? 0.0f : exp2f(m[r] * scale_log2 - base);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kNs; ++j) {
        s[j][2 * r] = exp2f(fmaf(s[j][2 * r], scale_log2, -base));
        s[j][2 * r + 1] = exp2f(fmaf(s[j][2 * r + 1], scale_log2, -base));
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l[r] = l[r] * corr[r] + sum;  // quad-partial: reduced once at the end
      m[r] = mx;
    }
#pragma unroll
    for (int j = 0; j < kNo; ++j) {
      o[j][0] *= corr[0];
      o[j][1] *= corr[0];
      o[j][2] *= corr[1];
      o[j][3] *= corr[1];
    }

    // O += P V: P's A fragment for keys [16kk, 16kk + 16) is S n-tiles 2kk and 2kk + 1.
#pragma unroll
    for (int kk = 0; kk < kFaKeys / 16; ++kk) {
      const std::uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                                  pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                  pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < kNo; j += 2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * L::kLd + j * 8 +
                                 (lane >> 4) * 8);
        mma_bf16(o[j], a, b[0], b[1]);
        mma_bf16(o[j + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  cp_async_wait<0>();

  // Epilogue: full row sums over the quad, then out = O / l and lse = m·scale + log(l).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    const std::int64_t qi = row0 + r * 8;
    if (qi >= p.tq) continue;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;  // a query that sees no key: 0
    const std::int64_t base = qi * p.out.stride[0] + h * p.out.stride[1] + 2 * t4;
#pragma unroll
    for (int j = 0; j < kNo; ++j) {
      st(p.out.data, base + j * 8, p.out.dtype, o[j][2 * r] * inv);
      st(p.out.data, base + j * 8 + 1, p.out.dtype, o[j][2 * r + 1] * inv);
    }
    if (p.lse != nullptr && t4 == 0) {
      p.lse[qi * p.lse_stride0 + h * p.lse_stride1] =
          l[r] > 0 ? m[r] * p.scale + logf(l[r]) : -INFINITY;
    }
  }
}

template <int HD>
void launch_fa2(const TcParams& p, std::int64_t hq, CUstream_st* stream) {
  constexpr int kBytes = FaLayout<HD>::kBytes;
  static const bool configured = [] {
    KVSHIFT_CUDA_CHECK(cudaFuncSetAttribute(attention_fa2_kernel<HD>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.tq, kFaQueries)), static_cast<unsigned>(hq));
  attention_fa2_kernel<HD><<<grid, kFaThreads, kBytes, stream>>>(p);
  KVSHIFT_LAUNCH_CHECK("attention_fa2_kernel");
}

}  // namespace

void attention_fa2(const AttentionDesc& d, float scale, CUstream_st* stream) {
  const TcParams p = tc_params(d, scale);
  if (d.q.shape[2] == 64) {
    launch_fa2<64>(p, d.q.shape[1], stream);
  } else {
    launch_fa2<128>(p, d.q.shape[1], stream);
  }
}

}  // namespace kvshift::kernels::cuda::detail
