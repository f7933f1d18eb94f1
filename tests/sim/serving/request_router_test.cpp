// The request router: HBM bookings that cannot overflow, and the three policies.
#include "sim/serving/request_router.hpp"

#include <gtest/gtest.h>

#include <set>

namespace kvshift::sim {
namespace {

TEST(RequestRouter, LeastLoadedPicksTheSmallestShareAndSkipsClosedOrFullGpus) {
  RequestRouter r(Router::kLeastLoaded, 1);
  for (int node = 0; node < 3; ++node) r.add_gpu(node, 1000);
  r.reserve(0, 1, 300);
  r.reserve(1, 2, 100);
  EXPECT_EQ(r.route(100, -1), 2);
  EXPECT_EQ(r.route(100, 2), 1) << "the excluded node is skipped";
  r.set_open(2, false);  // draining or down
  EXPECT_EQ(r.route(100, -1), 1);
  EXPECT_EQ(r.route(950, -1), -1) << "nobody has room";
  EXPECT_EQ(r.destinations(100, -1, 4), (std::vector<int>{1, 0}));
  EXPECT_EQ(r.reserved(0), 300);
  EXPECT_TRUE(r.holds(0, 1));
}

TEST(RequestRouter, BookingsThatWouldOverflowOrRepeatAreInvariantFailures) {
  RequestRouter r(Router::kLeastLoaded, 1);
  r.add_gpu(0, 1000);
  r.reserve(0, 7, 600);
  EXPECT_THROW(r.reserve(0, 7, 10), std::logic_error) << "reserved twice";
  RequestRouter full(Router::kLeastLoaded, 1);
  full.add_gpu(0, 1000);
  EXPECT_THROW(full.reserve(0, 1, 1001), std::logic_error) << "over capacity";
  RequestRouter gone(Router::kLeastLoaded, 1);
  gone.add_gpu(0, 1000);
  EXPECT_THROW(gone.release(0, 3), std::logic_error) << "released what it never held";
  gone.reserve(0, 4, 500);
  EXPECT_EQ(gone.clear(0), (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(gone.reserved(0), 0);
}

TEST(RequestRouter, RoundRobinCyclesAndRandomIsSeeded) {
  RequestRouter rr(Router::kRoundRobin, 1);
  for (int node = 0; node < 3; ++node) rr.add_gpu(node, 1000);
  EXPECT_EQ(rr.route(1, -1), 0);
  EXPECT_EQ(rr.route(1, -1), 1);
  EXPECT_EQ(rr.route(1, -1), 2);
  EXPECT_EQ(rr.route(1, -1), 0);
  std::vector<int> a, b;
  RequestRouter r1(Router::kRandom, 42), r2(Router::kRandom, 42);
  for (int node = 0; node < 5; ++node) {
    r1.add_gpu(node, 1000);
    r2.add_gpu(node, 1000);
  }
  for (int i = 0; i < 20; ++i) {
    a.push_back(r1.route(1, -1));
    b.push_back(r2.route(1, -1));
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int>(a.begin(), a.end()).size(), 2u);
}

}  // namespace
}  // namespace kvshift::sim
