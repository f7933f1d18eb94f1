// Wall-clock timing of one operation: warm-up runs, then `repeats` timed runs
// summarised as median, 10th and 90th percentile (util::percentile: linear
// interpolation between the closest ranks). The summary is shared by the CPU
// and CUDA profilers and the benchmarks, so their spreads mean the same thing.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "backend/profiler.hpp"
#include "util/percentile.hpp"

namespace kvshift::backend {

/// Median, p10 and p90 of `seconds` (sorted in place) and their count, into `row`. Inline:
/// the CUDA half of the backend uses it and does not link the CPU half.
inline void summarise(std::vector<double>& seconds, OpTiming& row) {
  std::sort(seconds.begin(), seconds.end());
  row.repeats = static_cast<int>(seconds.size());
  if (seconds.empty()) return;
  row.median_s = util::percentile(seconds, 0.5);
  row.p10_s = util::percentile(seconds, 0.1);
  row.p90_s = util::percentile(seconds, 0.9);
}

/// Times `run` (`warmup` untimed calls, then `repeats` timed ones) into one cost-table row.
/// `prepare`, if given, runs before every call and is not timed.
OpTiming time_op(const std::string& op, std::int64_t tokens, std::int64_t sharing, int warmup,
                 int repeats, const std::function<void()>& run,
                 const std::function<void()>& prepare = {});

}  // namespace kvshift::backend
