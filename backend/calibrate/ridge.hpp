// Ridge regression with an intercept, the offline half of a RISK-KV predictor:
// Y ≈ X·A + 1·bᵀ, fitted on centred data, with λ chosen from a grid by the
// relative error on held-out rows, then refitted on all rows with that λ.
// λ is relative: λ = α · tr(XcᵀXc)/p, so one grid suits every feature scale.
// The normal equations are formed in fp32 GEMMs and solved in double with
// Eigen's Cholesky (LLT);
// a λ too small for the system's rounding fails the factorisation and is skipped. Leaves out:
// cross-validation folds, per-output λ.
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "backend/tensor.hpp"

namespace kvshift::backend::calibrate {

/// A fitted ridge map: Y ≈ X·weight + 1·bias.
struct RidgeFit {
  Matrix weight;                      ///< A: [features, outputs]
  RowVector bias;                     ///< b: [outputs]
  double alpha = 0.0;                 ///< chosen grid value (λ = α·tr(XcᵀXc)/p)
  double lambda = 0.0;                ///< λ of the final fit (on all rows)
  double validation_rel_error = 0.0;  ///< ‖Yv − Ŷv‖²/‖Yv − mean‖² at the chosen α
};

/// The default α grid.
std::vector<double> default_alpha_grid();

/// Solves the ridge problem on rows [0, rows) with a fixed α (no selection).
/// Throws InputError mentioning `what` if the data are not finite or the system is singular.
RidgeFit fit_ridge_fixed(const Matrix& x, const Matrix& y, double alpha, const std::string& what);

/// Picks α on held-out rows [train_rows, rows) after fitting on [0, train_rows), then refits
/// on all rows. Needs 1 <= train_rows < rows. Throws InputError (naming `what`) on a
/// non-finite or singular fit. `threads` form the two normal equations and try the grid's α
/// side by side (the same arithmetic as one thread).
RidgeFit fit_ridge(const Matrix& x, const Matrix& y, Eigen::Index train_rows,
                   const std::vector<double>& alphas, const std::string& what, int threads = 1);

}  // namespace kvshift::backend::calibrate
