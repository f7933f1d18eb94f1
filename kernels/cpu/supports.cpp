// What the CPU twins run. Each loads and stores through load_float/store_float, which take every
// float dtype, so a twin runs whatever validate() (ops.cpp) admits for its op's first tensor:
// all three float dtypes, except where validate() narrows them. i32 is only ever an index or id
// tensor, never an op's first one. The twins have no shape limits beyond validate()'s.
#include "kernels/backends.hpp"

namespace kvshift::kernels::cpu {

bool supports(Op op, DType dtype) {
  switch (op) {
    case Op::kRmsNorm:
    case Op::kRope:
    case Op::kSwiglu:
    case Op::kAttention:
    case Op::kAttentionMass:
    case Op::kKvGather:
    case Op::kGemm:
    case Op::kEmbed:
    case Op::kFillUniform:
    case Op::kAnchorGather:
    case Op::kReconstruct:
      return dtype != DType::kI32;
    case Op::kBiasRopeScatter:  // z is a GEMM's output, kept in f32 or bf16
      return dtype == DType::kF32 || dtype == DType::kBF16;
    case Op::kGroupReduce:  // the score and mapper ops work on f32 only
    case Op::kAvgPool:
    case Op::kLogMeanAttention:
    case Op::kIm2Col:
    case Op::kBiasAct:
    case Op::kLayerNorm:
    case Op::kWindowAttention:
    case Op::kAxialHead:
    case Op::kTopK:
      return dtype == DType::kF32;
  }
  return false;
}

}  // namespace kvshift::kernels::cpu
