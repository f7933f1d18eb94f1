// IdMap against std::unordered_map under random inserts, finds and erases.
#include "sim/id_map.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

namespace kvshift::sim {
namespace {

TEST(IdMap, RandomOperationsMatchAnUnorderedMap) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 20; ++round) {
    IdMap map;
    std::unordered_map<std::uint32_t, std::uint32_t> ref;
    std::vector<std::uint32_t> keys;
    // Sequential ids, as the network hands them out, plus a few far-off ones.
    std::uint32_t next = static_cast<std::uint32_t>(rng() % 1000);
    for (int op = 0; op < 20'000; ++op) {
      const int what = static_cast<int>(rng() % 10);
      if (what < 5 || keys.empty()) {
        const std::uint32_t id = rng() % 50 == 0 ? static_cast<std::uint32_t>(rng() >> 33) : next++;
        if (ref.count(id)) continue;
        const auto value = static_cast<std::uint32_t>(rng());
        map.insert(id, value);
        ref.emplace(id, value);
        keys.push_back(id);
      } else if (what < 8) {
        const std::size_t k = rng() % keys.size();
        ASSERT_TRUE(map.erase(keys[k]));
        ref.erase(keys[k]);
        ASSERT_FALSE(map.erase(keys[k])) << "erased twice";
        keys[k] = keys.back();
        keys.pop_back();
      } else {
        const std::uint32_t id = static_cast<std::uint32_t>(rng() % (next + 10));
        const auto it = ref.find(id);
        const std::optional<std::uint32_t> got = map.find(id);
        ASSERT_EQ(got.has_value(), it != ref.end()) << "id " << id;
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
      }
      ASSERT_EQ(map.size(), ref.size());
    }
    for (const auto& [id, value] : ref) ASSERT_EQ(map.find(id), value);
  }
}

TEST(IdMap, TheEmptyMarkerIsNeverFound) {
  IdMap map;
  EXPECT_FALSE(map.find(IdMap::kEmpty));
  map.insert(1, 2);
  EXPECT_FALSE(map.find(IdMap::kEmpty));
  EXPECT_FALSE(map.erase(IdMap::kEmpty));
  EXPECT_EQ(map.find(1), 2u);
}

}  // namespace
}  // namespace kvshift::sim
