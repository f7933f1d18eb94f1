// Per-point seeds: the published splitmix64 values, and seeds that depend on
// the point's settings (not its position in the sweep).
#include "sweep/point_seed.hpp"

#include <gtest/gtest.h>

#include <set>

namespace kvshift::sweep {
namespace {

TEST(PointSeed, Splitmix64MatchesTheReferenceSequence) {
  // The reference generator seeded with 0 yields splitmix64(0), splitmix64(gamma), ...
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ULL), 0x6E789E6AA1B965F4ULL);
}

TEST(PointSeed, Fnv1aMatchesTheReferenceValues) {
  EXPECT_EQ(fnv1a64(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xAF63DC4C8601EC8CULL);
}

TEST(PointSeed, SameSettingsSameSeedWhateverTheSweepAround) {
  const std::vector<std::pair<std::string, std::string>> p = {{"/a", "1Gbps"}, {"/b", "4"}};
  EXPECT_EQ(point_seed(42, p), point_seed(42, p));
  EXPECT_NE(point_seed(42, p), point_seed(43, p));
  EXPECT_NE(point_seed(42, p), point_seed(42, {{"/a", "1Gbps"}, {"/b", "8"}}));
  EXPECT_NE(point_seed(42, {{"/a", "1"}, {"/b", "23"}}),
            point_seed(42, {{"/a", "12"}, {"/b", "3"}}));
}

TEST(PointSeed, ManyPointsGetDistinctSeeds) {
  std::set<std::uint64_t> seeds;
  for (int i = 0; i < 1000; ++i) seeds.insert(point_seed(1, {{"/x", std::to_string(i)}}));
  EXPECT_EQ(seeds.size(), 1000u);
}

}  // namespace
}  // namespace kvshift::sweep
