// What the CUDA kernels run. Every kernel loads and stores through detail::ld/st (common.cuh),
// which switch over all float dtypes, and cublasGemmEx takes f32, bf16 and f16, so each op runs
// every dtype validate() admits, as its CPU twin does. CUDA's own limits are shapes (cuda.hpp).
#include "kernels/cuda.hpp"

namespace kvshift::kernels::cuda {

bool supports(Op op, DType dtype) { return cpu::supports(op, dtype); }

}  // namespace kvshift::kernels::cuda
