// The fit set's ridge data: for every layer, the pre-RoPE keys and values of
// each history token ([K_pre | V], the anchor features) and the normalised
// attention input (the label), from exact forwards over the fit requests.
// Rows are request-major; the last requests' rows are the held-out rows on
// which λ is chosen. A fit for (targets, anchors) concatenates the columns it
// needs, so every (group, anchors) pair the search asks for is one GEMM away.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/calibrate/fold.hpp"
#include "backend/calibrate/ridge.hpp"
#include "backend/model.hpp"
#include "backend/reconstruct.hpp"

namespace kvshift::backend::calibrate {

struct FitData {
  std::vector<Matrix> features;  ///< per layer [rows, w]: [K_pre | V]
  std::vector<Matrix> labels;    ///< per layer [rows, hidden]: RMSNorm'd attention input
  Eigen::Index train_rows = 0;   ///< rows [0, train_rows) fit; the rest choose λ
  Eigen::Index rows() const { return features.empty() ? 0 : features.front().rows(); }
};

/// Runs the exact forwards over `histories` (one span per fit request) and collects the
/// data; the last `held_out` requests are the validation rows. The first `sink_rows` rows of
/// each request are left out: they are sent exact (GroupPredictor::sink_rows), and the BOS
/// row, which sees no context, would otherwise pull the fit towards a row it never rebuilds.
FitData gather_fit_data(const Model& model,
                        const std::vector<std::span<const std::int32_t>>& histories, int held_out,
                        int threads, int sink_rows = 0);

/// A folded predictor with its fit diagnostics.
struct FittedGroup {
  int group = 0;
  GroupPredictor predictor;
  double alpha = 0.0;
  double lambda = 0.0;
  double validation_rel_error = 0.0;  ///< of the labels H (unfolded), held-out rows
  double fold_max_rel_error = 0.0;  ///< max |folded − unfolded| / max |unfolded| on held-out rows
};

/// Fits, folds and checks one (group, anchors) pair. Throws InputError on a bad fit
/// and std::runtime_error if folding changes the output beyond fp32 rounding. `threads`: the
/// ridge fit's (fit_ridge).
FittedGroup fit_group(const FitData& data, const ModelWeights& weights, int group,
                      const std::vector<int>& target_layers, const std::vector<int>& anchor_layers,
                      const std::vector<double>& alphas, int threads = 1);

}  // namespace kvshift::backend::calibrate
