// The predictor cache: one fetch per node serves every move that waits for it.
#include "sim/serving/predictor_cache.hpp"

#include <gtest/gtest.h>

namespace kvshift::sim {
namespace {

using State = PredictorCache::State;

TEST(PredictorCache, OneFetchServesEveryMoveThatWaitsAndThenStaysResident) {
  PredictorCache c(3, true);
  EXPECT_FALSE(c.at_or_coming(1));
  c.begin_fetch(1, 500);
  EXPECT_EQ(c.state(1), State::kFetching);
  EXPECT_TRUE(c.at_or_coming(1)) << "a move planned now ships no copy of its own";
  EXPECT_EQ(c.eta_ns(1), 500);
  c.wait(1, 10);
  c.wait(1, 11);
  EXPECT_THROW(c.begin_fetch(1, 600), std::logic_error) << "never a second fetch in flight";
  EXPECT_EQ(c.end_fetch(1, true), (std::vector<std::uint64_t>{10, 11}));
  EXPECT_EQ(c.state(1), State::kResident);
  EXPECT_EQ(c.copies(), 1);
  c.drop(1);  // the node failed
  EXPECT_EQ(c.state(1), State::kAbsent);
  EXPECT_EQ(c.copies(), 0);
}

TEST(PredictorCache, AFailedFetchOrANodeThatCannotHoldThemLeavesNothing) {
  PredictorCache small(2, false);
  small.begin_fetch(0, 1);
  small.wait(0, 7);
  EXPECT_EQ(small.end_fetch(0, true), (std::vector<std::uint64_t>{7}));
  EXPECT_EQ(small.state(0), State::kAbsent) << "an HBM budget below the predictors keeps none";
  PredictorCache c(2, true);
  c.begin_fetch(0, 1);
  c.wait(0, 3);
  EXPECT_EQ(c.end_fetch(0, false), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(c.state(0), State::kAbsent);
  c.preload(1);
  EXPECT_EQ(c.state(1), State::kResident);
  EXPECT_THROW(c.wait(0, 4), std::logic_error) << "no fetch to wait for";
}

}  // namespace
}  // namespace kvshift::sim
