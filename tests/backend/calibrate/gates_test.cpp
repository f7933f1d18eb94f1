// Gate math against hand-computed cases: bootstrap distributions small enough
// to work out exactly, determinism by seed (the nearest-rank rule itself is
// tested in tests/util/percentile_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/calibrate/gates.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

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
  for (GateRule g : {GateRule(Gate::kMean), GateRule(Gate::kUpper90), GateRule(Gate::kStableSplit),
                     GateRule(Gate::kShare, 0.1), GateRule(Gate::kShare, 0.05)}) {
    EXPECT_EQ(parse_gate(rule_name(g), "--gate"), g) << rule_name(g);
  }
  EXPECT_EQ(rule_name(parse_gate("share:0.10", "--gate")), "share:0.1");
  for (const char* bad : {"upper95", "share:1.5", "share:abc", "share:", "share:0", "share:1",
                          "share:-0.1", "share:0.1x", "share:nan"}) {
    try {
      parse_gate(bad, "--gate");
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--gate"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// Clopper–Pearson bounds in closed form where they exist: with no request over ε the
// one-sided upper bound solves (1 − p)^n = 1 − level; with all of them over, the lower
// bound solves p^n = 1 − level.
TEST(Gates, ShareBoundsMatchTheClosedForms) {
  for (int n : {1, 10, 32, 48, 200}) {
    EXPECT_NEAR(share_upper(0, n, 0.9), 1.0 - std::pow(0.1, 1.0 / n), 1e-12) << n;
    EXPECT_NEAR(share_lower(n, n, 0.9), std::pow(0.1, 1.0 / n), 1e-12) << n;
    EXPECT_EQ(share_upper(n, n, 0.9), 1.0);
    EXPECT_EQ(share_lower(0, n, 0.9), 0.0);
  }
  // x = 1 of n: (1 − p)^n + n·p·(1 − p)^(n − 1) = 0.1 at the bound.
  const double p = share_upper(1, 48, 0.9);
  EXPECT_NEAR(std::pow(1 - p, 48) + 48 * p * std::pow(1 - p, 47), 0.1, 1e-12);
  // Symmetry: upper(x) = 1 − lower(n − x).
  for (int x = 0; x <= 24; ++x) {
    EXPECT_NEAR(share_upper(x, 24, 0.975), 1.0 - share_lower(24 - x, 24, 0.975), 1e-12) << x;
  }
}

// The bound's promise, computed exactly: for a true share p, the chance that the 90 % upper
// bound of x ~ Binomial(n, p) lies below p is at most 10 % (Clopper–Pearson is conservative).
TEST(Gates, ShareUpperBoundCoversTheTrueShare) {
  for (int n : {24, 48}) {
    for (double p : {0.02, 0.05, 0.1, 0.2, 0.45}) {
      double miss = 0.0;
      for (int x = 0; x <= n; ++x) {
        if (share_upper(x, n, 0.9) < p) {
          miss += binomial_cdf(x, n, p) - binomial_cdf(x - 1, n, p);
        }
      }
      EXPECT_LE(miss, 0.1 + 1e-12) << n << " " << p;
    }
  }
}

// Constructed requests with known shares over ε: the share:0.10 gate at 48 requests accepts
// up to 1 request over (bound 7.9 %) and rejects 2 (10.7 %); at 32 it needs none over
// (values from an independent Python bisection on the binomial CDF).
TEST(Gates, ShareGateOnConstructedRequests) {
  auto deltas = [](int n, int over) {
    std::vector<double> d(static_cast<std::size_t>(n), 0.001);
    for (int i = 0; i < over; ++i) d[static_cast<std::size_t>(i * 7 % n)] = 0.01;
    return d;
  };
  EXPECT_EQ(count_over(deltas(48, 2), 0.002), 2);
  EXPECT_EQ(count_over(deltas(48, 2), 0.01), 0);  // strictly over ε
  EXPECT_NEAR(share_upper(0, 48, 0.9), 0.0468, 1e-4);
  EXPECT_NEAR(share_upper(1, 48, 0.9), 0.0786, 1e-4);
  EXPECT_NEAR(share_upper(2, 48, 0.9), 0.1071, 1e-4);
  EXPECT_NEAR(share_upper(0, 32, 0.9), 0.0694, 1e-4);
  EXPECT_NEAR(share_upper(1, 32, 0.9), 0.1162, 1e-4);
  EXPECT_LE(share_upper(count_over(deltas(48, 1), 0.002), 48, 0.9), 0.10);
  EXPECT_GT(share_upper(count_over(deltas(48, 2), 0.002), 48, 0.9), 0.10);
  EXPECT_GT(share_upper(count_over(deltas(32, 1), 0.002), 32, 0.9), 0.10);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
