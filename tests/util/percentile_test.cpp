// Both percentile rules against values worked out by hand.
#include "util/percentile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace kvshift::util {
namespace {

TEST(Percentile, InterpolatesLinearlyBetweenTheClosestRanks) {
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_EQ(percentile(v, 0.0), 1.0);
  EXPECT_EQ(percentile(v, 0.25), 1.75);  // pos 0.75: 1 + 0.75 · (2 − 1)
  EXPECT_EQ(percentile(v, 0.5), 2.5);    // pos 1.5
  EXPECT_EQ(percentile(v, 1.0), 4.0);
  const std::vector<double> w{10, 20, 30, 40, 50};  // numpy.percentile(w, [10, 50, 90])
  EXPECT_EQ(percentile(w, 0.1), 14.0);
  EXPECT_EQ(percentile(w, 0.5), 30.0);
  EXPECT_EQ(percentile(w, 0.9), 46.0);
}

TEST(Percentile, TheMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  const std::vector<double> v{1, 2, 4, 8};
  EXPECT_EQ(percentile(v, 0.5), 3.0);
  const std::vector<double> one{7.25};
  EXPECT_EQ(percentile(one, 0.5), 7.25);
  EXPECT_EQ(percentile(one, 0.9), 7.25);
}

TEST(NearestRankPercentile, IsTheValueAtRankCeilQN) {
  std::vector<double> v(10);
  std::iota(v.begin(), v.end(), 1.0);                 // 1..10
  EXPECT_EQ(nearest_rank_percentile(v, 0.9), 9.0);    // ceil(9) = 9th
  EXPECT_EQ(nearest_rank_percentile(v, 0.91), 10.0);  // ceil(9.1) = 10th
  EXPECT_EQ(nearest_rank_percentile(v, 0.5), 5.0);    // a value of the sample, not 5.5
  EXPECT_EQ(nearest_rank_percentile(v, 0.05), 1.0);
  EXPECT_EQ(nearest_rank_percentile(v, 0.0), 1.0);  // rank at least 1
  EXPECT_EQ(nearest_rank_percentile(v, 1.0), 10.0);
}

TEST(NearestRankPercentile, AProductJustAboveAnIntegerCountsAsThatInteger) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);  // 1..100
  ASSERT_GT(0.07 * 100.0, 7.0);        // 7.000000000000001 in binary
  EXPECT_EQ(nearest_rank_percentile(v, 0.07), 7.0);
  EXPECT_EQ(nearest_rank_percentile(v, 0.99), 99.0);
  EXPECT_EQ(nearest_rank_percentile(v, 0.999), 100.0);
}

TEST(NearestRankPercentile, TheSummaryQuantilesAreRankCeilQNAtEveryCount) {
  // The run summary's p50/p90/p99 were ceil(q·n) without the 1e-9 allowance: the same ranks.
  for (std::size_t n = 1; n <= 2000; ++n) {
    std::vector<double> v(n);
    std::iota(v.begin(), v.end(), 1.0);
    for (double q : {0.5, 0.9, 0.99, 0.1, 0.95}) {
      const double rank = std::max(1.0, std::ceil(q * static_cast<double>(n)));
      ASSERT_EQ(nearest_rank_percentile(v, q), rank) << "n = " << n << ", q = " << q;
    }
  }
}

TEST(NearestRankPercentiles, SelectTheSameValuesAsSortingFirst) {
  std::mt19937_64 rng(7);
  const std::vector<double> qs{0.0, 0.5, 0.5, 0.9, 0.99, 1.0};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> v(1 + rng() % 3000);
    for (double& x : v) x = static_cast<double>(rng() % 97);  // many ties
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const std::vector<double> got = nearest_rank_percentiles(v, qs);
    ASSERT_EQ(got.size(), qs.size());
    for (std::size_t i = 0; i < qs.size(); ++i) {
      ASSERT_EQ(got[i], nearest_rank_percentile(sorted, qs[i])) << "n = " << v.size();
    }
    std::sort(v.begin(), v.end());
    ASSERT_EQ(v, sorted);  // reordered, nothing lost or changed
  }
}

TEST(NearestRankPercentiles, RefuseNoValuesAndQsOutOfOrderOrOutsideZeroOne) {
  std::vector<double> none, v{3, 1, 2};
  const std::vector<double> half{0.5}, descending{0.9, 0.5}, outside{1.5};
  EXPECT_THROW(nearest_rank_percentiles(none, half), std::invalid_argument);
  EXPECT_THROW(nearest_rank_percentiles(v, descending), std::invalid_argument);
  EXPECT_THROW(nearest_rank_percentiles(v, outside), std::invalid_argument);
}

TEST(Percentile, RefusesNoValuesUnsortedValuesAndQOutsideZeroOne) {
  const std::vector<double> none;
  const std::vector<double> unsorted{2, 1};
  const std::vector<double> v{1, 2};
  for (auto* f : {&percentile, &nearest_rank_percentile}) {
    EXPECT_THROW(f(none, 0.5), std::invalid_argument);
    EXPECT_THROW(f(unsorted, 0.5), std::invalid_argument);
    EXPECT_THROW(f(v, -0.01), std::invalid_argument);
    EXPECT_THROW(f(v, 1.01), std::invalid_argument);
    EXPECT_THROW(f(v, std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  }
}

}  // namespace
}  // namespace kvshift::util
