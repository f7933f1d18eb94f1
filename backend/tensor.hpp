// Dense fp32 tensors of the CPU backend. Activations and weights are Eigen
// row-major matrices: a [tokens, features] activation has one token per row,
// so a token's K or V of all heads is one contiguous row and a head's slice is
// a column block. Linear weights keep Hugging Face's [out, in] layout; y = x·Wᵀ.
#pragma once

#include <Eigen/Core>

namespace kvshift::backend {

/// Row-major fp32 matrix: [rows, cols].
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// fp32 column vector (norm weights, biases).
using Vector = Eigen::VectorXf;
/// fp32 row vector.
using RowVector = Eigen::RowVectorXf;

}  // namespace kvshift::backend
