// CPU twins of the KV-pruning score transforms: the GQA group reduction of
// per-query-head scores to KV heads (H2O and SnapKV sum, KVZip takes the max),
// SnapKV's average pooling along tokens, and ProxyKV's log_mean_attention
// feature transform. Same arithmetic as backend/pruning.cpp and
// backend/proxy_scoring.cpp (fp32 sums in row order; the log in double).
#include <algorithm>
#include <cmath>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::cpu {

void group_reduce(const GroupReduceDesc& d) {
  validate(d);
  require_device("group_reduce", Device::kHost, {&d.in, &d.out});
  const std::int64_t group = d.in.shape[0] / d.out.shape[0];
  for (std::int64_t r = 0; r < d.out.shape[0]; ++r) {
    for (std::int64_t t = 0; t < d.out.shape[1]; ++t) {
      float acc = load_float(d.in, d.in.offset({r * group, t}));
      for (std::int64_t i = 1; i < group; ++i) {
        const float v = load_float(d.in, d.in.offset({r * group + i, t}));
        acc = d.reduce == Reduce::kSum ? acc + v : std::max(acc, v);
      }
      store_float(d.out, d.out.offset({r, t}), acc);
    }
  }
}

void avg_pool(const AvgPoolDesc& d) {
  validate(d);
  require_device("avg_pool", Device::kHost, {&d.in, &d.out});
  const std::int64_t tokens = d.in.shape[1], r = d.kernel / 2;
  for (std::int64_t row = 0; row < d.in.shape[0]; ++row) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      float sum = 0;
      for (std::int64_t s = std::max<std::int64_t>(0, t - r); s <= std::min(tokens - 1, t + r); ++s)
        sum += load_float(d.in, d.in.offset({row, s}));
      store_float(d.out, d.out.offset({row, t}), sum / static_cast<float>(d.kernel));
    }
  }
}

void log_mean_attention(const LogMeanAttentionDesc& d) {
  validate(d);
  require_device("log_mean_attention", Device::kHost, {&d.mass, &d.out});
  const std::int64_t tokens = d.mass.shape[1];
  for (std::int64_t c = 0; c < d.mass.shape[0]; ++c) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const double mean = static_cast<double>(load_float(d.mass, d.mass.offset({c, t}))) /
                          static_cast<double>(tokens - t);
      store_float(d.out, d.out.offset({c, t}), static_cast<float>(std::log(mean + d.eps)));
    }
  }
}

}  // namespace kvshift::kernels::cpu
