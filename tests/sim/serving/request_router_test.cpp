// The request router: HBM bookings that cannot overflow, and the three policies.
#include "sim/serving/request_router.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

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

// least_loaded ranks by the share of a GPU's KV room booked, kv_aware by the KV bytes
// booked: on GPUs with equal room they order every GPU alike (and a run is the same under
// either, as the docs say); with unequal room they part ways.
TEST(RequestRouter, KvAwareAndLeastLoadedCoincideOnlyWhenEveryGpuHasTheSameRoom) {
  for (const bool equal : {true, false}) {
    RequestRouter shares(Router::kLeastLoaded, 1), bytes(Router::kKvAware, 1);
    for (RequestRouter* r : {&shares, &bytes}) {
      r->add_gpu(0, 1000);
      r->add_gpu(1, equal ? 1000 : 4000);
    }
    std::vector<int> a, b;
    for (std::uint64_t id = 1; id <= 12; ++id) {
      a.push_back(shares.route(100, -1));
      b.push_back(bytes.route(100, -1));
      shares.reserve(a.back(), id, 100);
      bytes.reserve(b.back(), id, 100);
    }
    if (equal) {
      EXPECT_EQ(a, b);
    } else {
      EXPECT_NE(a, b);
      // By share the big GPU takes 4 of every 5 (ties go to the first); by bytes they alternate.
      EXPECT_EQ(std::count(a.begin(), a.end(), 1), 9);
      EXPECT_EQ(std::count(b.begin(), b.end(), 1), 6);
    }
  }
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

TEST(RequestRouter, PoolsRouteOnlyAmongTheirGpusEachByItsOwnPolicy) {
  RequestRouter r(Router::kLeastLoaded, 1);
  const int kv_aware = r.add_pool(Router::kKvAware);
  r.add_gpu(0, 1000);            // pool 0
  r.add_gpu(1, 4000, kv_aware);  // pool 1: a bigger GPU
  r.add_gpu(2, 1000, kv_aware);
  r.reserve(1, 1, 800);  // share 0.2, but 800 bytes booked
  r.reserve(2, 2, 500);  // share 0.5, 500 bytes booked
  EXPECT_EQ(r.route(100, -1, PoolSet{1} << kv_aware), 2) << "KV-aware: fewest bytes booked";
  EXPECT_EQ(r.route(100, -1, PoolSet{1}), 0) << "pool 0 only";
  EXPECT_EQ(r.route(100, -1), 0) << "over all pools: the lowest share of each pool's pick";
  EXPECT_EQ(r.destinations(100, -1, 4, PoolSet{1} << kv_aware), (std::vector<int>{2, 1}));
  EXPECT_EQ(r.destinations(100, -1, 4, kAllPools, [](int node) { return node != 2; }),
            (std::vector<int>{0, 1}))
      << "a node that does not accept (its transfer slots are taken) is skipped";
  EXPECT_EQ(r.held(1, 1), 800);
  r.release(1, 1);
  EXPECT_EQ(r.reserved(1), 0);
  EXPECT_THROW(r.add_gpu(3, 10, 7), std::logic_error) << "no pool 7";
}

}  // namespace
}  // namespace kvshift::sim
