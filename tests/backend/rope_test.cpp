// RoPE in the Hugging Face half-split convention.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/rope.hpp"

namespace kvshift::backend {
namespace {

Matrix random_matrix(Eigen::Index r, Eigen::Index c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

TEST(Rope, InvertAfterApplyIsTheIdentity) {
  const Matrix x = random_matrix(37, 3 * 64, 1);
  Matrix y = x;
  const RopeDesc d{3, 64, 1e6};
  apply_rope(y, d, 5000);
  EXPECT_GT((y - x).norm(), 0.1f * x.norm());  // it did rotate
  apply_rope(y, d, 5000, true);
  EXPECT_LT((y - x).norm() / x.norm(), 1e-6);
}

TEST(Rope, RotatesDimensionIWithIPlusHalfHeadDim) {
  Matrix x = Matrix::Zero(1, 8);  // one head, head_dim 8
  x(0, 1) = 1.0f;                 // pairs (1, 5)
  apply_rope(x, {1, 8, 10000.0}, 3);
  const double angle = 3.0 * std::pow(10000.0, -2.0 * 1 / 8);
  EXPECT_NEAR(x(0, 1), std::cos(angle), 1e-6);
  EXPECT_NEAR(x(0, 5), std::sin(angle), 1e-6);
  for (int i : {0, 2, 3, 4, 6, 7}) EXPECT_EQ(x(0, i), 0.0f) << i;
}

TEST(Rope, PositionZeroIsUnchangedAndNormsArePreserved) {
  const Matrix x = random_matrix(4, 2 * 16, 2);
  Matrix y = x;
  const std::vector<std::int64_t> pos{0, 1, 1000, 32767};
  apply_rope(y, {2, 16, 10000.0}, pos);
  EXPECT_EQ(y.row(0), x.row(0));
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    EXPECT_NEAR(y.row(r).norm(), x.row(r).norm(), 1e-5 * x.row(r).norm());
  }
}

TEST(Rope, RejectsAWidthThatIsNotHeadsTimesHeadDim) {
  Matrix x(2, 10);
  EXPECT_THROW(apply_rope(x, {1, 8, 1e4}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::backend
