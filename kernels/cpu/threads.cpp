// The CPU ops' thread setting; see cpu.hpp. Eigen's own thread count is set
// once from it, because Eigen otherwise takes every core for each GEMM.
#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::cpu {
namespace {

int threads_from_environment() {
  const char* env = std::getenv("KVSHIFT_THREADS");
  return std::max(1, env ? std::atoi(env) : 1);
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> setting{threads_from_environment()};
  return setting;
}

}  // namespace

int threads() {
#ifdef _OPENMP
  return thread_setting().load();
#else
  return 1;
#endif
}

void set_threads(int count) {
  thread_setting().store(std::max(1, count));
  Eigen::setNbThreads(threads());
}

void apply_threads() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::setNbThreads(threads()); });
}

}  // namespace kvshift::kernels::cpu
