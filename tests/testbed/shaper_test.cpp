// The token buckets' booking arithmetic, without sockets.
#include "testbed/shaper.hpp"

#include <gtest/gtest.h>

namespace kvshift::testbed {
namespace {

using std::chrono::nanoseconds;

TEST(LinkShaper, BooksFramesBackToBackAtTheLinkRate) {
  LinkShaper l("a->b", BitsPerSecond{8e9}, kBurst);        // 1 byte per ns
  const auto t0 = Clock::now() + std::chrono::seconds(1);  // in the future: no burst credit
  EXPECT_EQ(l.book(t0, 1000) - t0, nanoseconds(1000));
  EXPECT_EQ(l.book(t0, 500) - t0, nanoseconds(1500));  // queued behind the first
  EXPECT_EQ(l.booked_bytes(), 1500);
}

TEST(LinkShaper, TakingTurnsGivesTwoFlowsHalfTheLinkEach) {
  LinkShaper l("a->b", BitsPerSecond{8e9}, kBurst);
  const auto t0 = Clock::now() + std::chrono::seconds(1);
  // Each flow books its next frame when its previous one has left (one frame at a time).
  Clock::time_point a = t0, b = t0;
  for (int i = 0; i < 100; ++i) {
    a = l.book(a, 1000);
    b = l.book(b, 1000);
  }
  EXPECT_EQ(a - t0, nanoseconds(199'000));
  EXPECT_EQ(b - t0, nanoseconds(200'000));  // both at ~2x the time alone: a fair share
}

TEST(LinkShaper, AnIdleLinkSavesAtMostTheBurst) {
  LinkShaper l("a->b", BitsPerSecond{8e9}, kBurst);
  const auto long_ago = Clock::now() - std::chrono::seconds(10);
  const auto before = Clock::now();
  const auto done = l.book(long_ago, 1000);
  EXPECT_GE(done - before, nanoseconds(1000) - kBurst);  // no more credit than the bucket holds
}

TEST(ShapedPath, TheBottleneckSetsThePace) {
  LinkShaper fast("a->s", BitsPerSecond{80e9}, kBurst), slow("s->b", BitsPerSecond{8e9}, kBurst);
  ShapedPath p;
  p.links = {&fast, &slow};
  const auto t0 = Clock::now() + std::chrono::seconds(1);
  EXPECT_EQ(p.book(t0, 1000) - t0, nanoseconds(1000));
  EXPECT_EQ(p.bottleneck().value, 8e9);
  EXPECT_EQ(ShapedPath{}.book(t0, 1000), t0);  // unshaped: no wait
}

}  // namespace
}  // namespace kvshift::testbed
