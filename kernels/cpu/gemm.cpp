// CPU GEMM (Eigen, fp32) and the whole RISK-KV reconstruction: anchor gather ->
// GEMM -> bias + RoPE + scatter, the three steps the CUDA version runs as two
// kernels around one cuBLAS call. fp32 operands with unit innermost stride go
// to Eigen in place (the CPU backend's reconstruction GEMM); others are copied.
#include <Eigen/Dense>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

bool direct(const TensorView& v) { return v.dtype == DType::kF32 && v.stride[1] == 1; }

Strided map(const TensorView& v) {
  return {static_cast<float*>(v.data), v.shape[0], v.shape[1], Eigen::OuterStride<>(v.stride[0])};
}

RowMatrix to_matrix(const TensorView& v) {
  RowMatrix m(v.shape[0], v.shape[1]);
  for (std::int64_t r = 0; r < v.shape[0]; ++r) {
    for (std::int64_t c = 0; c < v.shape[1]; ++c) m(r, c) = load_float(v, v.offset({r, c}));
  }
  return m;
}

}  // namespace

void gemm(const GemmDesc& d) {
  validate(d);
  require_device("gemm", Device::kHost, {&d.a, &d.b, &d.c});
  // In place for fp32 rows: a forward's projections (beta 0) and residual adds (beta 1, as
  // x += a·bᵀ accumulates).
  if (direct(d.a) && direct(d.b) && direct(d.c) && (d.beta == 0 || (d.beta == 1 && d.alpha == 1))) {
    apply_threads();
    Strided c = map(d.c);
    if (d.beta == 1) {
      if (d.b_transposed) {
        c.noalias() += map(d.a) * map(d.b).transpose();
      } else {
        c.noalias() += map(d.a) * map(d.b);
      }
      return;
    }
    if (d.b_transposed) {
      c.noalias() = map(d.a) * map(d.b).transpose();
    } else {
      c.noalias() = map(d.a) * map(d.b);
    }
    if (d.alpha != 1) c *= d.alpha;
    return;
  }
  const RowMatrix a = to_matrix(d.a);
  const RowMatrix b = to_matrix(d.b);
  RowMatrix c = d.b_transposed ? RowMatrix(a * b.transpose()) : RowMatrix(a * b);
  for (std::int64_t r = 0; r < c.rows(); ++r) {
    for (std::int64_t col = 0; col < c.cols(); ++col) {
      const std::int64_t off = d.c.offset({r, col});
      float v = d.alpha * c(r, col);
      if (d.beta != 0) v += d.beta * load_float(d.c, off);
      store_float(d.c, off, v);
    }
  }
}

void reconstruct(const ReconstructDesc& d) {
  validate(d);
  anchor_gather(anchor_gather_of(d));
  gemm(gemm_of(d));
  bias_rope_scatter(epilogue_of(d));
}

}  // namespace kvshift::kernels::cpu
