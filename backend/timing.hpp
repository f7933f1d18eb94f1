// Wall-clock timing of one operation: warm-up runs, then `repeats` timed runs
// summarised as median, 10th and 90th percentile (util::percentile: linear
// interpolation between the closest ranks). Shared by the CPU profiler and the
// benchmarks.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "backend/profiler.hpp"

namespace kvshift::backend {

/// Times `run` (`warmup` untimed calls, then `repeats` timed ones) into one cost-table row.
/// `prepare`, if given, runs before every call and is not timed.
OpTiming time_op(const std::string& op, std::int64_t tokens, std::int64_t sharing, int warmup,
                 int repeats, const std::function<void()>& run,
                 const std::function<void()>& prepare = {});

}  // namespace kvshift::backend
