// The pooled figures of `kvshift quality` on inputs whose answer is known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

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

QualityRow row_of(std::string method, std::optional<double> rho, std::vector<double> per_request) {
  QualityRow row;
  row.method = row.label = std::move(method);
  row.retention = rho;
  row.per_request = std::move(per_request);
  for (double d : row.per_request) row.mean += d / static_cast<double>(row.per_request.size());
  return row;
}

TEST(Quality, PairedDifferencesAgainstTheLeaderCancelTheSharedNoise) {
  // Per request a base cost that varies a lot (shared by every method); b pays exactly 0.01
  // more than a everywhere, c ±0.02 around a, KVZip less than a.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 0.2);
  std::vector<double> base, b, c, kv;
  for (int i = 0; i < 40; ++i) {
    base.push_back(u(rng));
    b.push_back(base.back() + 0.01);
    c.push_back(base.back() + (i % 2 ? 0.02 : -0.02));
    kv.push_back(base.back() - 0.005);
  }
  const std::vector<QualityRow> rows = {row_of("exact", std::nullopt, std::vector<double>(40)),
                                        row_of("b", 0.5, b),
                                        row_of("a", 0.5, base),
                                        row_of("kvzip", 0.5, kv),
                                        row_of("c", 0.5, c),
                                        row_of("b", 0.3, b),
                                        row_of("a", 0.3, b)};
  const auto paired = paired_against_leader(rows, 2000, 1);
  // At 0.5 the leader is a (KVZip, the oracle, is lower but never leads); at 0.3 it is the
  // first of two equal rows.
  ASSERT_EQ(paired.size(), 4u);
  EXPECT_EQ(paired[0].label, "b");
  EXPECT_EQ(paired[0].leader, "a");
  EXPECT_NEAR(paired[0].mean, 0.01, 1e-12);
  EXPECT_NEAR(paired[0].ci95_low, 0.01, 1e-12);  // the same gap on every request: no width
  EXPECT_NEAR(paired[0].ci95_high, 0.01, 1e-12);
  EXPECT_EQ(paired[1].label, "kvzip");
  EXPECT_NEAR(paired[1].ci95_high, -0.005, 1e-12);
  EXPECT_EQ(paired[2].label, "c");
  EXPECT_NEAR(paired[2].mean, 0.0, 1e-12);
  EXPECT_LT(paired[2].ci95_low, 0.0);
  EXPECT_GT(paired[2].ci95_high, 0.0);
  EXPECT_EQ(paired[3].retention, 0.3);
  EXPECT_EQ(paired[3].leader, "b");
  EXPECT_EQ(paired[3].label, "a");
  EXPECT_EQ(paired[3].ci95_low, 0.0);
  EXPECT_THROW(
      paired_against_leader({row_of("a", 0.5, {0.1}), row_of("b", 0.5, {0.1, 0.2})}, 2000, 1),
      std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
