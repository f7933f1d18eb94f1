// Gate math against hand-computed cases: nearest-rank quantiles, bootstrap
// distributions small enough to work out exactly, determinism by seed.
#include <gtest/gtest.h>

#include <vector>

#include "backend/calibrate/gates.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

TEST(Gates, NearestRankQuantileByHand) {
  const std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(nearest_rank_quantile(v, 0.9), 9.0);    // ceil(9) = 9th
  EXPECT_EQ(nearest_rank_quantile(v, 0.91), 10.0);  // ceil(9.1) = 10th
  EXPECT_EQ(nearest_rank_quantile(v, 0.05), 1.0);
  EXPECT_EQ(nearest_rank_quantile(v, 1.0), 10.0);
  EXPECT_THROW(nearest_rank_quantile(v, 0.0), std::invalid_argument);
}

TEST(Gates, ConstantDeltasHaveNoSpread) {
  const std::vector<double> v(24, 0.0015);
  EXPECT_DOUBLE_EQ(bootstrap_upper(v, 0.9, 2000, 1), 0.0015);
  const auto ci = bootstrap_interval(v, 0.95, 2000, 1);
  EXPECT_DOUBLE_EQ(ci.first, 0.0015);
  EXPECT_DOUBLE_EQ(ci.second, 0.0015);
}

TEST(Gates, TwoRequestsUpper90IsTheLargerOne) {
  // Resample means of {0, 1}: 0, 0.5, 1 with P = 1/4, 1/2, 1/4; CDF(0.5) = 0.75 < 0.9.
  const std::vector<double> v{0.0, 1.0};
  EXPECT_EQ(bootstrap_upper(v, 0.9, 4000, 5), 1.0);
  const auto ci = bootstrap_interval(v, 0.95, 4000, 5);
  EXPECT_EQ(ci.first, 0.0);
  EXPECT_EQ(ci.second, 1.0);
}

TEST(Gates, FourRequestsOneBadByHand) {
  // Means of resamples of {0,0,0,1}: k/4 with k ~ Binomial(4, 1/4):
  // CDF 0.316, 0.738, 0.949, 0.996, 1 at 0, .25, .5, .75, 1.
  // Upper-90 = 0.5; the 95 % interval is [0, 0.75]; the mean is 0.25.
  const std::vector<double> v{0.0, 0.0, 1.0, 0.0};
  EXPECT_DOUBLE_EQ(mean_of(v), 0.25);
  EXPECT_EQ(bootstrap_upper(v, 0.9, 20000, 9), 0.5);
  const auto ci = bootstrap_interval(v, 0.95, 20000, 9);
  EXPECT_EQ(ci.first, 0.0);
  EXPECT_EQ(ci.second, 0.75);
}

TEST(Gates, BootstrapIsDeterministicForASeed) {
  const std::vector<double> v{0.001, -0.002, 0.004, 0.0005, 0.003, -0.001, 0.002};
  EXPECT_EQ(bootstrap_means(v, 2000, 42), bootstrap_means(v, 2000, 42));
  const auto m = bootstrap_means(v, 2000, 42);
  EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
  EXPECT_GE(m.front(), -0.002);
  EXPECT_LE(m.back(), 0.004);
  EXPECT_GE(bootstrap_upper(v, 0.9, 2000, 42), mean_of(v));
}

TEST(Gates, NamesRoundTripAndUnknownNamesAreInputErrors) {
  for (Gate g : {Gate::kMean, Gate::kUpper90, Gate::kStableSplit}) {
    EXPECT_EQ(parse_gate(gate_name(g), "--gate"), g);
  }
  try {
    parse_gate("upper95", "--gate");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--gate"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvshift::backend::calibrate
