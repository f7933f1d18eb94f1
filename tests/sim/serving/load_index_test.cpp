// LoadIndex against a std::set of (share, gpu): the same order after any mix of
// inserts, moves and removals, and visits that stop where they are told to.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "sim/serving/load_index.hpp"

namespace kvshift::sim {
namespace {

TEST(LoadIndex, VisitsInTheOrderOfASortedSet) {
  std::mt19937_64 rng(3);
  LoadIndex index;
  std::set<std::pair<double, int>> ref;
  std::vector<double> share(200, -1);
  for (int step = 0; step < 20'000; ++step) {
    const int gpu = static_cast<int>(rng() % share.size());
    if (rng() % 4 == 0) {
      index.erase(gpu);
      if (share[gpu] >= 0) ref.erase({share[gpu], gpu});
      share[gpu] = -1;
    } else {
      // Few distinct shares, so ties (broken by index) are common.
      const double s = static_cast<double>(rng() % 16) / 16.0;
      index.set(gpu, s);
      if (share[gpu] >= 0) ref.erase({share[gpu], gpu});
      ref.insert({s, gpu});
      share[gpu] = s;
    }
    ASSERT_EQ(index.size(), ref.size());
    if (step % 97 != 0) continue;
    std::vector<int> got;
    index.visit_in_order([&](int g) {
      got.push_back(g);
      return false;
    });
    std::vector<int> want;
    for (const auto& [s, g] : ref) want.push_back(g);
    ASSERT_EQ(got, want) << "step " << step;
    // A visit that stops after k GPUs sees the first k.
    if (want.empty()) continue;
    const std::size_t k = 1 + rng() % want.size();
    std::vector<int> first;
    index.visit_in_order([&](int g) {
      first.push_back(g);
      return first.size() == k;
    });
    ASSERT_EQ(first, std::vector<int>(want.begin(), want.begin() + static_cast<long>(k)));
  }
}

}  // namespace
}  // namespace kvshift::sim
