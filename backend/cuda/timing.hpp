// Timing of enqueued GPU work with CUDA events: warm-up runs (not timed), then
// `repeats` runs each bracketed by events on the stream, summarised as an
// OpTiming row by backend::summarise (the CPU profiler's rule).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/profiler.hpp"

struct CUstream_st;

namespace kvshift::backend::gpu {

/// Times `enqueue` (which launches work on `stream`) and returns one cost-table row.
OpTiming time_on_stream(const std::string& op, std::int64_t tokens, std::int64_t sharing,
                        int warmup, int repeats, CUstream_st* stream,
                        const std::function<void()>& enqueue);

}  // namespace kvshift::backend::gpu
