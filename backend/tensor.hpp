// Dense fp32 tensors of the CPU backend. Activations and weights are Eigen
// row-major matrices: a [tokens, features] activation has one token per row,
// so a token's K or V of all heads is one contiguous row and a head's slice is
// a column block. Linear weights keep Hugging Face's [out, in] layout; y = x·Wᵀ.
#pragma once

#include <Eigen/Core>

#include <cstdint>

#include "kernels/tensor.hpp"

namespace kvshift::backend {

/// Row-major fp32 matrix: [rows, cols].
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// fp32 column vector (norm weights, biases).
using Vector = Eigen::VectorXf;
/// fp32 row vector.
using RowVector = Eigen::RowVectorXf;

/// x [rows, heads·head_dim] seen by the kernels' ops as [rows, heads, head_dim] (no copy).
inline kernels::TensorView head_view(const Matrix& x, std::int64_t heads) {
  return kernels::make_view(const_cast<float*>(x.data()), kernels::DType::kF32,
                            kernels::Device::kHost, {x.rows(), heads, x.cols() / heads});
}

/// x [rows, cols] as a kernels view (no copy).
inline kernels::TensorView matrix_view(const Matrix& x) {
  return kernels::make_view(const_cast<float*>(x.data()), kernels::DType::kF32,
                            kernels::Device::kHost, {x.rows(), x.cols()});
}

}  // namespace kvshift::backend
