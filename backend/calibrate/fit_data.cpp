// Fit data and per-group fits; see fit_data.hpp.
#include "backend/calibrate/fit_data.hpp"

#include <stdexcept>
#include <string>

#include "backend/parallel.hpp"

namespace kvshift::backend::calibrate {
namespace {

Matrix concat_columns(const std::vector<Matrix>& per_layer, const std::vector<int>& layers) {
  const Eigen::Index rows = per_layer.at(layers.front()).rows();
  Eigen::Index cols = 0;
  for (int l : layers) cols += per_layer.at(l).cols();
  Matrix out(rows, cols);
  Eigen::Index c = 0;
  for (int l : layers) {
    out.middleCols(c, per_layer[l].cols()) = per_layer[l];
    c += per_layer[l].cols();
  }
  return out;
}

std::string describe(int group, const std::vector<int>& anchors) {
  std::string s = "G" + std::to_string(group) + " (anchor layers";
  for (int l : anchors) s += " " + std::to_string(l);
  return s + ")";
}

}  // namespace

FitData gather_fit_data(const Model& model,
                        const std::vector<std::span<const std::int32_t>>& histories, int held_out,
                        int threads, int sink_rows) {
  const auto& spec = model.spec();
  if (histories.empty()) throw std::invalid_argument("gather_fit_data: no requests");
  const auto per = static_cast<Eigen::Index>(histories.front().size());
  for (const auto& h : histories) {
    if (static_cast<Eigen::Index>(h.size()) != per) {
      throw std::invalid_argument("gather_fit_data: requests differ in length");
    }
  }
  const auto n = static_cast<Eigen::Index>(histories.size());
  if (held_out < 1 || held_out >= n) throw std::invalid_argument("gather_fit_data: bad held_out");
  if (sink_rows < 0 || sink_rows >= per) {
    throw std::invalid_argument("gather_fit_data: sink_rows must leave rows to fit");
  }
  const Eigen::Index kept = per - sink_rows;  // rows of each request in the fit
  FitData d;
  d.features.assign(spec.layers, Matrix(n * kept, spec.kv_width()));
  d.labels.assign(spec.layers, Matrix(n * kept, spec.hidden));
  d.train_rows = (n - held_out) * kept;
  parallel_for(histories.size(), threads, [&](std::size_t i) {
    KvCache cache = model.new_cache();
    ForwardOptions o;
    o.logits = LogitsMode::kNone;
    o.capture_attn_inputs = true;
    ForwardResult r = model.forward(histories[i], cache, o);
    const Eigen::Index row0 = static_cast<Eigen::Index>(i) * kept;
    const Eigen::Index half = spec.kv_width() / 2;
    for (int l = 0; l < spec.layers; ++l) {
      d.features[l].block(row0, 0, kept, half) = pre_rope_keys(cache, l, spec).bottomRows(kept);
      d.features[l].block(row0, half, kept, half) = cache.v[l].bottomRows(kept);
      d.labels[l].middleRows(row0, kept) = r.attn_inputs[l].bottomRows(kept);
    }
  });
  return d;
}

FittedGroup fit_group(const FitData& data, const ModelWeights& weights, int group,
                      const std::vector<int>& target_layers, const std::vector<int>& anchor_layers,
                      const std::vector<double>& alphas, int threads) {
  if (target_layers.empty() || anchor_layers.empty()) {
    throw std::invalid_argument("fit_group: needs targets and anchors");
  }
  const Matrix x = concat_columns(data.features, anchor_layers);
  const Matrix y = concat_columns(data.labels, target_layers);
  const std::string what = describe(group, anchor_layers);
  const RidgeFit fit = fit_ridge(x, y, data.train_rows, alphas, what, threads);
  FittedGroup g;
  g.group = group;
  g.alpha = fit.alpha;
  g.lambda = fit.lambda;
  g.validation_rel_error = fit.validation_rel_error;
  g.predictor = fold_predictor(fit, weights, anchor_layers, target_layers);
  // Folding is algebra: check it on (up to 512) held-out rows.
  const Eigen::Index rows = std::min<Eigen::Index>(512, x.rows() - data.train_rows);
  const Matrix xv = x.middleRows(data.train_rows, rows);
  const Matrix unfolded = unfolded_output(xv, fit, weights, target_layers);
  const Matrix folded = folded_output(xv, g.predictor);
  const double scale = std::max(1e-30, static_cast<double>(unfolded.cwiseAbs().maxCoeff()));
  g.fold_max_rel_error = static_cast<double>((folded - unfolded).cwiseAbs().maxCoeff()) / scale;
  if (!(g.fold_max_rel_error < 1e-3)) {
    throw std::runtime_error(what + ": folded predictor differs from the unfolded path by " +
                             std::to_string(g.fold_max_rel_error) + " (relative)");
  }
  return g;
}

}  // namespace kvshift::backend::calibrate
