// Folding is exact: X·(A·P) + (b·P + c) equals the unfolded path (X·A + b)
// through each target's k/v projections, with and without Qwen-style biases,
// and the folded predictor has the layout backend::reconstruct expects.
#include <gtest/gtest.h>

#include "backend/calibrate/fold.hpp"
#include "backend/weights.hpp"

namespace kvshift::backend::calibrate {
namespace {

cost_model::ModelSpec tiny_spec(bool bias) {
  cost_model::ModelSpec s;
  s.name = "tiny";
  s.layers = 6;
  s.hidden = 24;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.head_dim = 6;
  s.intermediate = 40;
  s.vocab = 50;
  s.attention_bias = bias;
  return s;
}

void check_fold(bool bias) {
  const ModelWeights w = random_weights(tiny_spec(bias), 11);
  const std::vector<int> anchors{0, 1, 4, 5}, targets{2, 3};
  const Eigen::Index p = 4 * w.spec.kv_width();
  RidgeFit fit;
  fit.weight = Matrix::Random(p, 2 * w.spec.hidden);
  fit.bias = RowVector::Random(2 * w.spec.hidden);
  const GroupPredictor g = fold_predictor(fit, w, anchors, targets);
  EXPECT_EQ(g.weight.rows(), p);
  EXPECT_EQ(g.weight.cols(), 2 * w.spec.kv_width());
  EXPECT_EQ(g.bias.size(), g.weight.cols());
  EXPECT_EQ(g.anchor_layers, anchors);
  EXPECT_EQ(g.target_layers, targets);
  const Matrix x = Matrix::Random(37, p);
  const Matrix folded = folded_output(x, g);
  const Matrix unfolded = unfolded_output(x, fit, w, targets);
  const double scale = unfolded.cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 0.0);
  EXPECT_LT((folded - unfolded).cwiseAbs().maxCoeff() / scale, 1e-5);
  // Hand check of one element: target 1's V, first column, row 0.
  const Eigen::Index half = w.spec.kv_width() / 2;
  const RowVector h1 = (x.row(0) * fit.weight).segment(w.spec.hidden, w.spec.hidden) +
                       fit.bias.segment(w.spec.hidden, w.spec.hidden);
  double v = h1.dot(w.layers[3].wv.row(0));
  if (bias) v += w.layers[3].bv(0);
  EXPECT_NEAR(folded(0, w.spec.kv_width() + half), v, 1e-4 * std::max(1.0, std::abs(v)));
}

TEST(Fold, FoldedEqualsUnfoldedWithoutBiases) { check_fold(false); }
TEST(Fold, FoldedEqualsUnfoldedWithQwenBiases) { check_fold(true); }

TEST(Fold, WrongRidgeWidthIsRejected) {
  const ModelWeights w = random_weights(tiny_spec(false), 1);
  RidgeFit fit;
  fit.weight = Matrix::Random(8, w.spec.hidden);  // one target's width, two targets given
  fit.bias = RowVector::Random(w.spec.hidden);
  EXPECT_THROW(fold_predictor(fit, w, {0, 1}, {2, 3}), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
