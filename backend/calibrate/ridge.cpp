// Ridge regression; see ridge.hpp.
#include "backend/calibrate/ridge.hpp"

#include <Eigen/Cholesky>
#include <cmath>
#include <exception>
#include <limits>

#include "backend/parallel.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

using MatrixD = Eigen::MatrixXd;

/// Centred normal equations of a block of rows.
struct Normal {
  MatrixD xtx, xty;
  RowVector mean_x, mean_y;
  double scale = 0.0;  // tr(XcᵀXc)/p
};

Normal normal_equations(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& y,
                        const std::string& what) {
  if (!x.allFinite() || !y.allFinite()) {
    throw InputError(what +
                     ": ridge fit: features or labels contain NaN/Inf (check the model "
                     "weights)");
  }
  Normal n;
  n.mean_x = x.colwise().mean();
  n.mean_y = y.colwise().mean();
  // fp32 GEMMs on centred data (the cost), accumulated into double for the solve; a λ
  // too small for the rounding is skipped by the grid (Cholesky fails), never used.
  const Matrix xc = x.rowwise() - n.mean_x;
  const Matrix yc = y.rowwise() - n.mean_y;
  Matrix xtx = Matrix::Zero(xc.cols(), xc.cols());
  xtx.selfadjointView<Eigen::Lower>().rankUpdate(xc.transpose());
  n.xtx = xtx.selfadjointView<Eigen::Lower>().toDenseMatrix().cast<double>();
  n.xty = (xc.transpose() * yc).cast<double>();
  n.scale = n.xtx.trace() / static_cast<double>(std::max<Eigen::Index>(1, x.cols()));
  if (!(n.scale > 0.0) || !std::isfinite(n.scale)) {
    throw InputError(what +
                     ": ridge fit is singular: the anchor features do not vary over the "
                     "fit rows");
  }
  return n;
}

MatrixD solve(const Normal& n, double lambda, const std::string& what) {
  MatrixD a = n.xtx;
  a.diagonal().array() += lambda;
  Eigen::LLT<MatrixD> llt(a);
  if (llt.info() != Eigen::Success) {
    throw InputError(what + ": ridge fit is singular (Cholesky failed at lambda " +
                     std::to_string(lambda) + ")");
  }
  MatrixD w = llt.solve(n.xty);
  if (!w.allFinite()) throw InputError(what + ": ridge fit produced NaN/Inf weights");
  return w;
}

RidgeFit finish(const Normal& n, const MatrixD& w, double alpha, double lambda) {
  RidgeFit f;
  f.weight = w.cast<float>();
  f.bias = n.mean_y - n.mean_x * f.weight;
  f.alpha = alpha;
  f.lambda = lambda;
  return f;
}

RidgeFit fit_fixed(const Normal& n, double alpha, const std::string& what) {
  const double lambda = alpha * n.scale;
  return finish(n, solve(n, lambda, what), alpha, lambda);
}

}  // namespace

std::vector<double> default_alpha_grid() { return {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0}; }

RidgeFit fit_ridge_fixed(const Matrix& x, const Matrix& y, double alpha, const std::string& what) {
  if (x.rows() != y.rows() || x.rows() < 2) {
    throw std::invalid_argument("fit_ridge: X and Y need the same number (>= 2) of rows");
  }
  return fit_fixed(normal_equations(x, y, what), alpha, what);
}

RidgeFit fit_ridge(const Matrix& x, const Matrix& y, Eigen::Index train_rows,
                   const std::vector<double>& alphas, const std::string& what, int threads) {
  if (x.rows() != y.rows() || train_rows < 2 || train_rows >= x.rows() || alphas.empty()) {
    throw std::invalid_argument("fit_ridge: need 2 <= train_rows < rows and a non-empty grid");
  }
  // The train rows' normal equations pick α, all rows' refit with it: both formed at once.
  // A failure of the second only counts where the refit needs it.
  Normal train, all;
  std::exception_ptr all_failed;
  parallel_for(2, threads, [&](std::size_t i) {
    if (i == 0) {
      train = normal_equations(x.topRows(train_rows), y.topRows(train_rows), what);
      return;
    }
    try {
      all = normal_equations(x, y, what);
    } catch (const InputError&) {
      all_failed = std::current_exception();
    }
  });
  const Eigen::Index val_rows = x.rows() - train_rows;
  const Matrix xv = x.bottomRows(val_rows).rowwise() - train.mean_x;
  const Matrix yv = y.bottomRows(val_rows).rowwise() - train.mean_y;
  const Matrix yv_dev = y.bottomRows(val_rows).rowwise() - y.bottomRows(val_rows).colwise().mean();
  const double denom =
      std::max(static_cast<double>(yv_dev.squaredNorm()), std::numeric_limits<double>::min());
  // Each α's held-out error on its own (NaN: too small a λ for this system, skipped).
  std::vector<double> errors(alphas.size(), std::numeric_limits<double>::quiet_NaN());
  parallel_for(alphas.size(), threads, [&](std::size_t i) {
    Matrix w;
    try {
      w = solve(train, alphas[i] * train.scale, what).cast<float>();
    } catch (const InputError&) {
      return;  // larger λs may still be fine
    }
    errors[i] = static_cast<double>((yv - xv * w).squaredNorm()) / denom;
  });
  double best_alpha = alphas.front();
  double best_err = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < alphas.size(); ++i) {
    if (errors[i] < best_err) {
      best_err = errors[i];
      best_alpha = alphas[i];
    }
  }
  if (!std::isfinite(best_err)) {
    throw InputError(what + ": ridge fit is singular or not finite at every lambda of the grid");
  }
  if (all_failed) std::rethrow_exception(all_failed);
  // Refit on all rows; should the chosen α fail there, the next larger one is used.
  for (double alpha : alphas) {
    if (alpha < best_alpha) continue;
    try {
      RidgeFit f = fit_fixed(all, alpha, what);
      f.validation_rel_error = best_err;
      return f;
    } catch (const InputError&) {
      if (alpha == alphas.back()) throw;
    }
  }
  RidgeFit f = fit_fixed(all, best_alpha, what);
  f.validation_rel_error = best_err;
  return f;
}

}  // namespace kvshift::backend::calibrate
