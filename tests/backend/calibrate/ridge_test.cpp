// Ridge with intercept: recovers a known affine map, picks a small λ for clean
// data, and rejects singular or non-finite data with a message naming the fit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/calibrate/ridge.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<float> n(0.0f, static_cast<float>(sd));
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

TEST(Ridge, RecoversAKnownAffineMap) {
  std::mt19937_64 rng(7);
  Matrix x = random_matrix(600, 5, rng);
  x.col(2).array() += 3.0f;  // a non-zero feature mean: the intercept must absorb it
  const Matrix a = random_matrix(5, 3, rng);
  RowVector b(3);
  b << 0.5f, -1.25f, 2.0f;
  Matrix y = x * a;
  y.rowwise() += b;
  y += random_matrix(600, 3, rng, 1e-4);
  const RidgeFit f = fit_ridge(x, y, 500, default_alpha_grid(), "synthetic");
  EXPECT_LE(f.alpha, 1e-3) << "clean data should choose a small lambda";
  EXPECT_LT((f.weight - a).cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_LT((f.bias - b).cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_LT(f.validation_rel_error, 1e-6);
  EXPECT_GT(f.lambda, 0.0);
}

TEST(Ridge, TwoThreadsGiveTheSameFitAsOne) {
  std::mt19937_64 rng(11);
  const Matrix x = random_matrix(700, 37, rng);
  Matrix y = x * random_matrix(37, 13, rng);
  y += random_matrix(700, 13, rng, 0.3);
  const RidgeFit one = fit_ridge(x, y, 550, default_alpha_grid(), "one", 1);
  const RidgeFit two = fit_ridge(x, y, 550, default_alpha_grid(), "two", 2);
  EXPECT_EQ(one.alpha, two.alpha);
  EXPECT_EQ(one.lambda, two.lambda);
  EXPECT_EQ(one.validation_rel_error, two.validation_rel_error);
  EXPECT_TRUE(one.weight == two.weight);
  EXPECT_TRUE(one.bias == two.bias);
  EXPECT_GT(one.weight.norm(), 0.0f);
}

TEST(Ridge, FixedLambdaShrinksTowardsTheMean) {
  std::mt19937_64 rng(3);
  const Matrix x = random_matrix(200, 4, rng);
  const Matrix a = random_matrix(4, 2, rng);
  const Matrix y = x * a;
  const RidgeFit small = fit_ridge_fixed(x, y, 1e-8, "s");
  const RidgeFit big = fit_ridge_fixed(x, y, 1e3, "b");
  EXPECT_LT((small.weight - a).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_LT(big.weight.norm(), 0.01 * a.norm());
  // With weights ~0 the prediction is the label mean: the bias.
  EXPECT_LT((big.bias - y.colwise().mean()).cwiseAbs().maxCoeff(), 0.01 * y.cwiseAbs().maxCoeff());
}

TEST(Ridge, ConstantFeaturesAreASingularFitNamingTheGroup) {
  Matrix x = Matrix::Constant(50, 3, 2.0f);
  Matrix y = Matrix::Random(50, 2);
  try {
    fit_ridge(x, y, 40, default_alpha_grid(), "G3 (anchor layers 0 1 6 7)");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("G3 (anchor layers 0 1 6 7)"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("singular"), std::string::npos);
  }
}

TEST(Ridge, NaNDataIsRejected) {
  Matrix x = Matrix::Random(50, 3);
  Matrix y = Matrix::Random(50, 2);
  x(7, 1) = std::nanf("");
  EXPECT_THROW(fit_ridge(x, y, 40, default_alpha_grid(), "G2"), InputError);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
