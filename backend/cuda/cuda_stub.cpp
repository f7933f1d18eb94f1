// make_cuda_profiler() for builds without a CUDA compiler: the target
// kvshift_backend_cuda still exists, and its factory says why it cannot run.
#include "backend/profiler.hpp"

namespace kvshift::backend {

std::unique_ptr<Profiler> make_cuda_profiler() {
  throw NotCompiled(
      "CUDA backend not compiled: rebuild with a CUDA toolkit (KVSHIFT_ENABLE_CUDA=ON)");
}

}  // namespace kvshift::backend
