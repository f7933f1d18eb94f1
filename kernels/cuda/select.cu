// CUDA top-K per head and KV compaction (ProxyKV pruning).
//
// top_k_kernel: one block per head. Scores map to order-preserving uint32 keys
// (sink and recent tokens get the largest key). A 32-step radix search finds
// v, the keep-th largest key (the largest v with count(key >= v) >= keep); then
// one ordered pass keeps every key > v and the lowest-index (keep - count(> v))
// keys == v, writing indices in ascending token order with block scans. This is
// exactly the CPU twin's stable descending sort, so indices match bit for bit.
#include "kernels/cuda/common.cuh"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cuda {
namespace {

using detail::DevView;

constexpr int kTopKThreads = 512;

__device__ __forceinline__ std::uint32_t token_key(const DevView& scores, std::int64_t h,
                                                   std::int64_t t, std::int64_t tokens,
                                                   std::int64_t sink, std::int64_t recent) {
  if (t < sink || t >= tokens - recent) return kForcedKey;
  return ordered_key(static_cast<const float*>(scores.data)[h * scores.stride[0] + t]);
}

__global__ void __launch_bounds__(kTopKThreads)
    top_k_kernel(DevView scores, DevView indices, std::int64_t sink, std::int64_t recent) {
  const std::int64_t h = blockIdx.x, tokens = scores.shape[1], keep = indices.shape[1];
  if (keep == 0) return;
  // 1. Radix search for the keep-th largest key.
  std::uint32_t v = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const std::uint32_t candidate = v | (1u << bit);
    long long count = 0;
    for (std::int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
      count += token_key(scores, h, t, tokens, sink, recent) >= candidate;
    }
    if (detail::block_sum(count) >= keep) v = candidate;
  }
  long long greater = 0;
  for (std::int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    greater += token_key(scores, h, t, tokens, sink, recent) > v;
  }
  const long long need_equal = keep - detail::block_sum(greater);
  // 2. Ordered compaction.
  auto* out = static_cast<std::int32_t*>(indices.data) + h * indices.stride[0];
  long long written = 0, equal_seen = 0;
  for (std::int64_t base = 0; base < tokens; base += blockDim.x) {
    const std::int64_t t = base + threadIdx.x;
    const std::uint32_t key = t < tokens ? token_key(scores, h, t, tokens, sink, recent) : 0;
    const bool gt = t < tokens && key > v, eq = t < tokens && key == v;
    int equal_total = 0, selected_total = 0;
    const long long equal_rank =
        equal_seen + detail::block_exclusive_scan(eq ? 1 : 0, &equal_total);
    const bool selected = gt || (eq && equal_rank < need_equal);
    const long long slot =
        written + detail::block_exclusive_scan(selected ? 1 : 0, &selected_total);
    if (selected) out[slot] = static_cast<std::int32_t>(t);
    written += selected_total;
    equal_seen += equal_total;
  }
}

__global__ void kv_gather_kernel(DevView src, DevView indices, DevView dst) {
  const std::int64_t keep = dst.shape[0], heads = dst.shape[1], hd = dst.shape[2];
  const std::int64_t tokens = src.shape[0], n = keep * heads * hd;
  const auto* idx = static_cast<const std::int32_t*>(indices.data);
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < n;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t e = g % hd, h = (g / hd) % heads, j = g / (hd * heads);
    const std::int64_t t = idx[h * indices.stride[0] + j];
    const float v = (t >= 0 && t < tokens)
                        ? detail::ld(src.data, t * src.stride[0] + h * src.stride[1] + e, src.dtype)
                        : __int_as_float(0x7FC00000);
    detail::st(dst.data, j * dst.stride[0] + h * dst.stride[1] + e, dst.dtype, v);
  }
}

}  // namespace

void top_k(const TopKDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("top_k", Device::kCuda, {&d.scores, &d.indices});
  if (d.scores.shape[0] == 0 || d.indices.shape[1] == 0) return;
  top_k_kernel<<<static_cast<unsigned>(d.scores.shape[0]), kTopKThreads, 0, stream>>>(
      detail::dev(d.scores), detail::dev(d.indices), d.sink, d.recent);
  KVSHIFT_LAUNCH_CHECK("top_k_kernel");
}

void kv_gather(const GatherDesc& d, CUstream_st* stream) {
  validate(d);
  require_device("kv_gather", Device::kCuda, {&d.src, &d.indices, &d.dst});
  const std::int64_t n = d.dst.shape[0] * d.dst.shape[1] * d.dst.shape[2];
  if (n == 0) return;
  kv_gather_kernel<<<detail::grid_for(n), detail::kThreads, 0, stream>>>(
      detail::dev(d.src), detail::dev(d.indices), detail::dev(d.dst));
  KVSHIFT_LAUNCH_CHECK("kv_gather_kernel");
}

}  // namespace kvshift::kernels::cuda
