// Folding a ridge predictor through the target layers' K/V projections: the
// ridge predicts each target layer's normalised attention input H_t (width
// hidden); K_pre = H_t·W_kᵀ + b_k and V = H_t·W_vᵀ + b_v are linear, so with
// the block-diagonal P (P_t = [W_kᵀ | W_vᵀ]) and c = [b_k | b_v] per target,
// X·A·P + (b·P + c) = X·B + d with B = A·P, d = b·P + c — one GEMM online,
// laid out as backend::GroupPredictor expects ([K_pre, V] per target layer).
#pragma once

#include <vector>

#include "backend/calibrate/ridge.hpp"
#include "backend/reconstruct.hpp"
#include "backend/weights.hpp"

namespace kvshift::backend::calibrate {

/// B = A·P, d = b·P + c for the given anchors/targets (A's outputs are the targets'
/// attention inputs, concatenated in target order).
GroupPredictor fold_predictor(const RidgeFit& fit, const ModelWeights& weights,
                              const std::vector<int>& anchor_layers,
                              const std::vector<int>& target_layers);

/// The unfolded path: (X·A + b) projected by each target layer's k/v_proj (+ biases),
/// [rows, |T|·w] in the same layout as X·B + d.
Matrix unfolded_output(const Matrix& x, const RidgeFit& fit, const ModelWeights& weights,
                       const std::vector<int>& target_layers);

/// The folded path: X·B + d.
Matrix folded_output(const Matrix& x, const GroupPredictor& p);

}  // namespace kvshift::backend::calibrate
