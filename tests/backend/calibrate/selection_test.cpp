// Selection on constructed risk tables: order by risk per saved byte, the
// accepted prefix that omits the most KV, "omit nothing" when none passes.
#include <gtest/gtest.h>

#include <random>

#include "backend/calibrate/selection.hpp"

namespace kvshift::backend::calibrate {
namespace {

TEST(Selection, OrdersByRiskPerSavedByte) {
  // G5 is riskier than G3 but saves three times the bytes: per byte it comes first.
  const std::vector<SingleRisk> s{
      {2, 0.004, 100}, {3, 0.001, 100}, {5, 0.002, 300}, {7, -0.001, 100}};
  EXPECT_EQ(order_by_risk_per_byte(s), (std::vector<int>{7, 5, 3, 2}));
}

TEST(Selection, TiesKeepTheLowerGroupFirst) {
  const std::vector<SingleRisk> s{{9, 0.001, 100}, {4, 0.001, 100}};
  EXPECT_EQ(order_by_risk_per_byte(s), (std::vector<int>{4, 9}));
}

std::vector<PrefixOutcome> table() {
  // k:        1       2        3        4
  // mean:  0.0005  0.0012   0.0019   0.0040
  // upper: 0.0011  0.0018   0.0031   0.0060
  return {{{4}, 100, 0.0005, 0.0011, 0.0010, {}},
          {{4, 6}, 200, 0.0012, 0.0018, 0.0025, {}},
          {{4, 6, 2}, 300, 0.0019, 0.0031, 0.0020, {}},
          {{4, 6, 2, 9}, 400, 0.0040, 0.0060, 0.0070, {}}};
}

TEST(Selection, EachGatePicksTheLongestAcceptedPrefix) {
  const auto t = table();
  EXPECT_EQ(choose_prefix(t, Gate::kMean, 0.002), std::optional<std::size_t>(2));
  EXPECT_EQ(choose_prefix(t, Gate::kUpper90, 0.002), std::optional<std::size_t>(1));
  // Stable-split: prefix 2 fails its confirmation (0.0025), prefix 1 passes both.
  EXPECT_EQ(choose_prefix(t, Gate::kStableSplit, 0.002), std::optional<std::size_t>(0));
}

TEST(Selection, AcceptedSetsNeedNotBeContiguous) {
  auto t = table();
  t[1].upper90 = 0.0030;  // k = 2 fails, k = 1 and k = 3 ...
  t[2].upper90 = 0.0019;  // ... pass: the larger omission wins
  EXPECT_EQ(choose_prefix(t, Gate::kUpper90, 0.002), std::optional<std::size_t>(2));
}

TEST(Selection, NothingPassingMeansOmitNothing) {
  EXPECT_FALSE(choose_prefix(table(), Gate::kUpper90, 0.001).has_value());
  EXPECT_FALSE(choose_prefix({}, Gate::kMean, 1.0).has_value());
}

TEST(Selection, StableSplitWithoutAConfirmationNeverPasses) {
  auto t = table();
  for (auto& p : t) p.confirm_upper90.reset();
  EXPECT_FALSE(choose_prefix(t, Gate::kStableSplit, 1.0).has_value());
}

TEST(Selection, ShareGateCountsRequestsOverEps) {
  auto t = table();
  // 48 requests each: prefix 1 has none over 0.002, prefix 2 one, prefix 3 two, prefix 4 five.
  const int over[] = {0, 1, 2, 5};
  for (std::size_t k = 0; k < t.size(); ++k) {
    t[k].deltas.assign(48, 0.0);
    for (int i = 0; i < over[k]; ++i) t[k].deltas[static_cast<std::size_t>(i)] = 0.004;
  }
  EXPECT_EQ(choose_prefix(t, {Gate::kShare, 0.10}, 0.002), std::optional<std::size_t>(1));
  EXPECT_EQ(choose_prefix(t, {Gate::kShare, 0.05}, 0.002), std::optional<std::size_t>(0));
  EXPECT_EQ(choose_prefix(t, {Gate::kShare, 0.10}, 0.004), std::optional<std::size_t>(3));
  t[0].deltas.clear();  // no per-request values: the share gate cannot accept
  EXPECT_FALSE(passes(t[0], {Gate::kShare, 0.5}, 1.0));
}

// Random prefix tables: under every gate, a looser ε never omits less (the frontier's rows are
// monotone), because every gate's acceptance only loosens as ε grows.
TEST(Selection, LooserEpsNeverOmitsLessUnderTheSameGate) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.004);
  const std::vector<double> grid{0.0, 0.001, 0.002, 0.005, 0.01, 0.02};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PrefixOutcome> t;
    for (int k = 1; k <= 8; ++k) {
      PrefixOutcome p;
      for (int g = 0; g < k; ++g) p.groups.push_back(g + 2);
      p.omitted_bytes = 100.0 * k;
      for (int r = 0; r < 32; ++r) p.deltas.push_back(0.0008 * k * (trial % 3) + noise(rng));
      p.mean = mean_of(p.deltas);
      p.upper90 = bootstrap_upper(p.deltas, 0.9, 2000, 1);
      p.confirm_upper90 = p.upper90 + noise(rng);
      t.push_back(p);
    }
    for (GateRule rule : {GateRule(Gate::kMean), GateRule(Gate::kUpper90),
                          GateRule(Gate::kStableSplit), GateRule(Gate::kShare, 0.1)}) {
      double last = -1.0;
      for (double eps : grid) {
        const auto c = choose_prefix(t, rule, eps);
        const double omitted = c ? t[*c].omitted_bytes : 0.0;
        EXPECT_GE(omitted, last) << rule_name(rule) << " eps " << eps << " trial " << trial;
        last = omitted;
      }
    }
  }
}

}  // namespace
}  // namespace kvshift::backend::calibrate
