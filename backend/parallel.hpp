// A minimal fork-join loop (calibration, quality, the ProxyKV dataset): `threads` std::threads take
// indices 0..n-1 from an atomic counter; the first exception is rethrown after
// all workers stop. Eigen runs single-threaded inside (the backend's default),
// so the cores go to independent requests instead of to GEMM barriers.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvshift::backend {

/// Calls fn(i) for i in [0, n) on up to `threads` threads; rethrows the first exception.
inline void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < n && !failed; i = next++) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  const std::size_t count =
      std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, threads)));
  if (count <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < count; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kvshift::backend
