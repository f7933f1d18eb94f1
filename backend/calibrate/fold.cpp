// Folding ridge predictors; see fold.hpp.
#include "backend/calibrate/fold.hpp"

#include <stdexcept>

namespace kvshift::backend::calibrate {
namespace {

/// [H_t]·P_t + c_t for one target layer: [rows, w] = [K_pre | V].
Matrix project_kv(const Matrix& h, const LayerWeights& lw, bool with_bias) {
  const Eigen::Index half = lw.wk.rows();
  Matrix out(h.rows(), 2 * half);
  out.leftCols(half).noalias() = h * lw.wk.transpose();
  out.rightCols(half).noalias() = h * lw.wv.transpose();
  if (with_bias && lw.bk.size()) {
    out.leftCols(half).rowwise() += lw.bk;
    out.rightCols(half).rowwise() += lw.bv;
  }
  return out;
}

void check_shapes(const RidgeFit& fit, const ModelWeights& weights,
                  const std::vector<int>& target_layers) {
  const Eigen::Index hidden = weights.spec.hidden;
  if (fit.weight.cols() != hidden * static_cast<Eigen::Index>(target_layers.size()) ||
      fit.bias.size() != fit.weight.cols()) {
    throw std::invalid_argument("fold: ridge outputs do not match |targets| x hidden");
  }
  for (int l : target_layers) {
    if (l < 0 || l >= static_cast<int>(weights.layers.size())) {
      throw std::invalid_argument("fold: target layer out of range");
    }
  }
}

}  // namespace

GroupPredictor fold_predictor(const RidgeFit& fit, const ModelWeights& weights,
                              const std::vector<int>& anchor_layers,
                              const std::vector<int>& target_layers) {
  check_shapes(fit, weights, target_layers);
  const Eigen::Index hidden = weights.spec.hidden;
  const Eigen::Index w = weights.spec.kv_width();
  GroupPredictor p;
  p.anchor_layers = anchor_layers;
  p.target_layers = target_layers;
  p.weight.resize(fit.weight.rows(), w * static_cast<Eigen::Index>(target_layers.size()));
  p.bias.resize(p.weight.cols());
  for (std::size_t t = 0; t < target_layers.size(); ++t) {
    const LayerWeights& lw = weights.layers[target_layers[t]];
    const auto in = static_cast<Eigen::Index>(t) * hidden;
    const auto out = static_cast<Eigen::Index>(t) * w;
    p.weight.middleCols(out, w) = project_kv(fit.weight.middleCols(in, hidden), lw, false);
    p.bias.segment(out, w) = project_kv(fit.bias.segment(in, hidden), lw, true).row(0);
  }
  if (weights.spec.gemma) {  // the keys' own norm follows the folded projection
    p.key_norm.resize(static_cast<Eigen::Index>(target_layers.size()), weights.spec.head_dim);
    for (std::size_t t = 0; t < target_layers.size(); ++t) {
      p.key_norm.row(static_cast<Eigen::Index>(t)) =
          weights.layers[target_layers[t]].k_norm.transpose();
    }
    p.norm_eps = static_cast<float>(weights.spec.rms_eps);
  }
  return p;
}

Matrix unfolded_output(const Matrix& x, const RidgeFit& fit, const ModelWeights& weights,
                       const std::vector<int>& target_layers) {
  check_shapes(fit, weights, target_layers);
  const Eigen::Index hidden = weights.spec.hidden;
  const Eigen::Index w = weights.spec.kv_width();
  Matrix h = x * fit.weight;
  h.rowwise() += fit.bias;
  Matrix out(x.rows(), w * static_cast<Eigen::Index>(target_layers.size()));
  for (std::size_t t = 0; t < target_layers.size(); ++t) {
    const auto i = static_cast<Eigen::Index>(t);
    out.middleCols(i * w, w) =
        project_kv(h.middleCols(i * hidden, hidden), weights.layers[target_layers[t]], true);
  }
  return out;
}

Matrix folded_output(const Matrix& x, const GroupPredictor& p) {
  Matrix z = x * p.weight;
  z.rowwise() += p.bias;
  return z;
}

}  // namespace kvshift::backend::calibrate
