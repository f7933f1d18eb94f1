// make_cuda_profiler() for builds without a CUDA compiler: it exists so
// that `kvshift profile --backend cuda` can say clearly why it cannot run.
#include "backend/profiler.hpp"

namespace kvshift::backend {

std::unique_ptr<Profiler> make_cuda_profiler() {
  throw NotCompiled(
      "the CUDA backend was not compiled into this build (configure on a machine with nvcc, "
      "-DKVSHIFT_ENABLE_CUDA=ON)");
}

}  // namespace kvshift::backend
