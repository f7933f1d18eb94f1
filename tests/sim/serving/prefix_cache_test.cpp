// PrefixCache: longest cached run, pins counted once, LRU eviction of unpinned
// blocks only (a released chain's tail first, a copy tier's head first), and a
// lost cache whose pins stay lost.
#include "sim/serving/prefix_cache.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace kvshift::sim {
namespace {

using Keys = std::vector<std::uint64_t>;

TEST(PrefixCache, MatchIsTheLongestCachedRunOfLeadingKeys) {
  PrefixCache c(100);
  EXPECT_EQ(c.match(Keys{1, 2, 3}), 0u);
  EXPECT_EQ(c.pin(Keys{1, 2}), 2u);
  EXPECT_EQ(c.match(Keys{1, 2, 3}), 2u);
  EXPECT_EQ(c.match(Keys{2, 3}), 1u);
  EXPECT_EQ(c.match(Keys{9, 1, 2}), 0u);  // a prefix match starts at the first block
  EXPECT_EQ(c.match(Keys{}), 0u);
}

TEST(PrefixCache, SharedBlocksArePinnedAndCountedOnce) {
  PrefixCache c(100);
  EXPECT_EQ(c.pin(Keys{1, 2, 3}), 3u);
  EXPECT_EQ(c.pin(Keys{1, 2}), 0u);  // a second user inserts nothing
  EXPECT_EQ(c.pinned_bytes(), 300);
  EXPECT_EQ(c.unpinned_bytes(), 0);
  EXPECT_EQ(c.users(1), 2);
  EXPECT_EQ(c.users(3), 1);
  c.unpin(Keys{1, 2, 3});
  EXPECT_EQ(c.pinned_bytes(), 200);
  EXPECT_EQ(c.unpinned_bytes(), 100);
  EXPECT_EQ(c.evict(1000), 1u);  // only the unpinned block 3 can go
  EXPECT_EQ(c.match(Keys{1, 2, 3}), 2u);
  c.unpin(Keys{1, 2});
  EXPECT_EQ(c.pinned_bytes(), 0);
  EXPECT_EQ(c.unpinned_bytes(), 200);
  EXPECT_EQ(c.blocks(), 2u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedTailFirstAndOnlyWhatIsAsked) {
  PrefixCache c(10);
  c.pin(Keys{1, 2, 3});
  c.unpin(Keys{1, 2, 3});  // LRU order 3, 2, 1: the tail first
  c.pin(Keys{1});
  c.unpin(Keys{1});            // 1 used again: order 3, 2, 1
  EXPECT_EQ(c.evict(15), 2u);  // 15 bytes need two blocks: 3 and 2
  EXPECT_EQ(c.blocks(), 1u);
  EXPECT_EQ(c.match(Keys{1, 2}), 1u);
  EXPECT_EQ(c.evict(0), 0u);
  EXPECT_EQ(c.evict(100), 1u);
  EXPECT_EQ(c.evict(100), 0u);
}

TEST(PrefixCache, AReleasedChainLosesItsTailFirstSoWhatStaysCanStillBeHit) {
  // Released front to back, a chain keeps its head longest: evicting its head first would
  // leave blocks no request can reach (a run is matched from its first block).
  PrefixCache c(10);
  c.pin(Keys{1, 2, 3, 4});
  c.unpin(Keys{1, 2, 3, 4});
  std::vector<std::uint64_t> evicted;
  EXPECT_EQ(c.evict(20, &evicted), 2u);
  EXPECT_EQ(evicted, (Keys{4, 3}));
  EXPECT_EQ(c.match(Keys{1, 2, 3, 4}), 2u);
}

TEST(PrefixCache, ACopyTierPassesAChainsHeadDownFirst) {
  // A copy tier (host DRAM, SSD) touched front to back evicts the head first: the tier below
  // it, in the end the storage node all nodes share, receives what any request can reach.
  PrefixCache c(10);
  c.touch(Keys{1, 2, 3, 4});
  std::vector<std::uint64_t> evicted;
  EXPECT_EQ(c.evict(20, &evicted), 2u);
  EXPECT_EQ(evicted, (Keys{1, 2}));
}

TEST(PrefixCache, PinningAnUnpinnedBlockTakesItOutOfTheEvictionOrder) {
  PrefixCache c(10);
  c.pin(Keys{1, 2});
  c.unpin(Keys{1, 2});
  c.pin(Keys{1});
  EXPECT_EQ(c.evict(100), 1u);  // block 2 only
  EXPECT_EQ(c.match(Keys{1}), 1u);
  EXPECT_EQ(c.pinned_bytes(), 10);
}

TEST(PrefixCache, UnpinWithoutAPinIsABug) {
  PrefixCache c(10);
  EXPECT_THROW(c.unpin(Keys{1}), std::logic_error);
  c.pin(Keys{1});
  c.unpin(Keys{1});
  EXPECT_THROW(c.unpin(Keys{1}), std::logic_error);
}

TEST(PrefixCache, ClearDropsEverythingAndBumpsTheGeneration) {
  PrefixCache c(10);
  c.pin(Keys{1, 2});
  const std::uint64_t before = c.generation();
  c.clear();
  EXPECT_EQ(c.generation(), before + 1);
  EXPECT_EQ(c.blocks(), 0u);
  EXPECT_EQ(c.pinned_bytes(), 0);
  EXPECT_EQ(c.match(Keys{1}), 0u);
}

}  // namespace
}  // namespace kvshift::sim
