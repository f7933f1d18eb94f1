// CPU twins of ProxyKV's selection ops: top-K per head (sink and recent tokens
// forced in, ties to the lower index, output ascending) and KV compaction.
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cpu {

void top_k(const TopKDesc& d) {
  validate(d);
  require_device("top_k", Device::kHost, {&d.scores, &d.indices});
  const std::int64_t heads = d.scores.shape[0], tokens = d.scores.shape[1];
  const std::int64_t keep = d.indices.shape[1];
  std::vector<std::uint32_t> key(tokens);
  std::vector<std::int32_t> order(tokens);
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const bool forced = t < d.sink || t >= tokens - d.recent;
      key[t] = forced ? kForcedKey : ordered_key(load_float(d.scores, d.scores.offset({h, t})));
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return key[a] > key[b]; });
    std::sort(order.begin(), order.begin() + keep);
    auto* out = static_cast<std::int32_t*>(d.indices.data);
    for (std::int64_t j = 0; j < keep; ++j) out[d.indices.offset({h, j})] = order[j];
  }
}

void kv_gather(const GatherDesc& d) {
  validate(d);
  require_device("kv_gather", Device::kHost, {&d.src, &d.indices, &d.dst});
  const std::int64_t tokens = d.src.shape[0], heads = d.src.shape[1], hd = d.src.shape[2];
  const auto* idx = static_cast<const std::int32_t*>(d.indices.data);
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t j = 0; j < d.dst.shape[0]; ++j) {
      const std::int64_t t = idx[d.indices.offset({h, j})];
      for (std::int64_t e = 0; e < hd; ++e) {
        const float v = (t >= 0 && t < tokens) ? load_float(d.src, d.src.offset({t, h, e}))
                                               : std::numeric_limits<float>::quiet_NaN();
        store_float(d.dst, d.dst.offset({j, h, e}), v);
      }
    }
  }
}

}  // namespace kvshift::kernels::cpu
