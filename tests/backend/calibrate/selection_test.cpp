// Selection on constructed risk tables: order by risk per saved byte, the
// accepted prefix that omits the most KV, "omit nothing" when none passes.
#include <gtest/gtest.h>

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
  return {{{4}, 100, 0.0005, 0.0011, 0.0010},
          {{4, 6}, 200, 0.0012, 0.0018, 0.0025},
          {{4, 6, 2}, 300, 0.0019, 0.0031, 0.0020},
          {{4, 6, 2, 9}, 400, 0.0040, 0.0060, 0.0070}};
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

}  // namespace
}  // namespace kvshift::backend::calibrate
