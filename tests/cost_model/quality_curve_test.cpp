// Measured quality curves: exact at the measured ratios, linear between them, nothing outside.
#include <gtest/gtest.h>

#include <random>

#include "cost_model/quality_curve.hpp"

namespace kvshift::cost_model {
namespace {

TEST(QualityCurve, ExactAtThePointsLinearBetweenNothingOutside) {
  const std::vector<QualityPoint> pts = {{0.5, 0.10}, {0.1, 0.50}, {0.3, 0.20}};  // any order
  EXPECT_EQ(interpolate_quality(pts, 0.3)->delta_nll, 0.20);
  EXPECT_EQ(interpolate_quality(pts, 0.3)->how, "measured at ρ 0.3");
  EXPECT_DOUBLE_EQ(interpolate_quality(pts, 0.4)->delta_nll, 0.15);
  EXPECT_EQ(interpolate_quality(pts, 0.4)->how, "interpolated between ρ 0.3 and 0.5");
  EXPECT_DOUBLE_EQ(interpolate_quality(pts, 0.2)->delta_nll, 0.35);
  EXPECT_FALSE(interpolate_quality(pts, 0.05));
  EXPECT_FALSE(interpolate_quality(pts, 0.7));
  EXPECT_FALSE(interpolate_quality({}, 0.5));
}

TEST(QualityCurve, StaysBetweenItsNeighboursAndIsMonotoneWhereThePointsAre) {
  // Property: for points falling with ρ, the interpolant falls too and stays inside the
  // bracket of its two neighbours.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<QualityPoint> pts;
    double nll = 1.0;
    for (double rho : {0.1, 0.2, 0.3, 0.5, 0.7}) pts.push_back({rho, nll -= 0.1 * u(rng)});
    double prev = 2.0;
    for (double rho = 0.1; rho <= 0.7; rho += 0.01) {
      const auto q = interpolate_quality(pts, rho);
      ASSERT_TRUE(q) << rho;
      EXPECT_LE(q->delta_nll, prev + 1e-12);
      EXPECT_GE(q->delta_nll, pts.back().delta_nll - 1e-12);
      EXPECT_LE(q->delta_nll, pts.front().delta_nll + 1e-12);
      prev = q->delta_nll;
    }
  }
}

}  // namespace
}  // namespace kvshift::cost_model
