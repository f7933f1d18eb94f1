// CUDA-event timing (see timing.hpp).
#include "backend/cuda/timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/timing.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::backend::gpu {
namespace {

/// Two events, destroyed on scope exit.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    KVSHIFT_CUDA_CHECK(cudaEventCreate(&start));
    KVSHIFT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

OpTiming time_on_stream(const std::string& op, std::int64_t tokens, std::int64_t sharing,
                        int warmup, int repeats, CUstream_st* stream,
                        const std::function<void()>& enqueue) {
  for (int i = 0; i < warmup; ++i) enqueue();
  KVSHIFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  EventPair events;
  std::vector<double> seconds;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    KVSHIFT_CUDA_CHECK(cudaEventRecord(events.start, stream));
    enqueue();
    KVSHIFT_CUDA_CHECK(cudaEventRecord(events.stop, stream));
    KVSHIFT_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0;
    KVSHIFT_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    seconds.push_back(ms * 1e-3);
  }
  OpTiming row;
  row.op = op;
  row.tokens = tokens;
  row.sharing = sharing;
  summarise(seconds, row);
  return row;
}

}  // namespace kvshift::backend::gpu
