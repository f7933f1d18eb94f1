// The pooled figures of `kvshift quality` on inputs whose answer is known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/calibrate/quality.hpp"

namespace kvshift::backend::calibrate {
namespace {

TEST(Quality, RecallCountsTheCommonPositionsPerRow) {
  const std::vector<std::vector<std::int64_t>> kept = {{0, 1, 2, 3}, {0, 5, 6, 7}};
  const std::vector<std::vector<std::int64_t>> ref = {{0, 1, 2, 3}, {0, 1, 6, 9}};
  EXPECT_DOUBLE_EQ(kept_recall(kept, kept), 1.0);
  EXPECT_DOUBLE_EQ(kept_recall(kept, ref), (1.0 + 0.5) / 2);
  EXPECT_THROW(kept_recall(kept, {{0}}), std::invalid_argument);
}

TEST(Quality, ReferenceKeptShareLeavesOutForcedTokensAndPoolsRows) {
  // Rows of 20 tokens, 2 sinks and 3 recent forced: positions 0, 1 and 17..19 never count.
  const KeepPolicy keep{0.5, 2, 3};
  const std::vector<std::vector<std::int64_t>> ref = {{0, 1, 4, 9, 18}, {0, 1, 5, 6, 7, 19}};
  const std::vector<std::vector<std::int64_t>> kept = {{0, 1, 4, 10, 18}, {0, 1, 5, 6, 19}};
  // Row 0 holds 1 of {4, 9}, row 1 2 of {5, 6, 7}: 3 of 5 pooled.
  EXPECT_DOUBLE_EQ(reference_kept_share(kept, ref, 20, keep), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(reference_kept_share(ref, ref, 20, keep), 1.0);
  EXPECT_TRUE(std::isnan(reference_kept_share(kept, {{0, 1, 18}, {19}}, 20, keep)));
  EXPECT_THROW(reference_kept_share(kept, {{0}}, 20, keep), std::invalid_argument);
}

TEST(Quality, RecoveredShareIsExactWhenEveryRequestAgrees) {
  // Per request the policy sits at a fixed fraction of the way from random to the oracle:
  // every resample then has exactly that share, so the interval collapses onto it.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.05, 0.5);
  std::vector<double> random, oracle, half, same_as_oracle;
  for (int i = 0; i < 40; ++i) {
    const double k = u(rng), r = k + u(rng);
    random.push_back(r);
    oracle.push_back(k);
    half.push_back(r - 0.5 * (r - k));
    same_as_oracle.push_back(k);
  }
  const auto [lo1, hi1] = recovered_share_interval(random, same_as_oracle, oracle, 2000, 1);
  EXPECT_DOUBLE_EQ(lo1, 1.0);
  EXPECT_DOUBLE_EQ(hi1, 1.0);
  const auto [lo0, hi0] = recovered_share_interval(random, random, oracle, 2000, 1);
  EXPECT_DOUBLE_EQ(lo0, 0.0);
  EXPECT_DOUBLE_EQ(hi0, 0.0);
  const auto [lo, hi] = recovered_share_interval(random, half, oracle, 2000, 1);
  EXPECT_NEAR(lo, 0.5, 1e-12);
  EXPECT_NEAR(hi, 0.5, 1e-12);
}

TEST(Quality, RecoveredShareIntervalBracketsThePointEstimate) {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::vector<double> random, policy, oracle;
  for (int i = 0; i < 64; ++i) {
    random.push_back(0.4 + noise(rng));
    policy.push_back(0.2 + noise(rng));
    oracle.push_back(0.1 + noise(rng));
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / v.size();
  };
  const double point = (mean(random) - mean(policy)) / (mean(random) - mean(oracle));
  const auto [lo, hi] = recovered_share_interval(random, policy, oracle, 4000, 2);
  EXPECT_LT(lo, point);
  EXPECT_GT(hi, point);
  EXPECT_GT(hi - lo, 0.05);  // real noise gives a real width
}

}  // namespace
}  // namespace kvshift::backend::calibrate
