// The replica store: placement rules, the room replicas book on each node (never over its
// capacity), and the bytes it holds, peak included.
#include "sim/serving/replica_store.hpp"

#include <gtest/gtest.h>

#include <random>

namespace kvshift::sim {
namespace {

const std::vector<NodeKind> kNodes = {NodeKind::kSwitch, NodeKind::kGpu, NodeKind::kGpu,
                                      NodeKind::kGpu, NodeKind::kStorage};
const std::vector<std::int64_t> kRoom = {0, 1000, 1000, 1000, 5000};
const auto kAll = [](int) { return true; };

ReplicaStore store(ReplicaPlacement p, int storage = -1) {
  return ReplicaStore(kNodes, kRoom, p, storage);
}

TEST(ReplicaStore, EachPlacementPicksItsNode) {
  EXPECT_EQ(store(ReplicaPlacement::kStorage, 4).pick(1, 10, kAll), 4);
  EXPECT_EQ(store(ReplicaPlacement::kStorage, 4).pick(1, 10, [](int i) { return i != 4; }), -1);
  EXPECT_EQ(store(ReplicaPlacement::kNextNode).pick(3, 10, kAll), 1)
      << "the next GPU node, wrapping around, skipping the switch and the store";
  EXPECT_EQ(store(ReplicaPlacement::kLocal).pick(2, 10, kAll), 2) << "its own node's host DRAM";
  EXPECT_EQ(store(ReplicaPlacement::kLocal).pick(2, 10, [](int i) { return i != 2; }), -1);
  ReplicaStore least = store(ReplicaPlacement::kLeastLoaded, 4);
  least.add(2, 100, 200);
  least.add(3, 50, 100);
  least.add(4, 70, 140);
  EXPECT_EQ(least.pick(3, 10, kAll), 1) << "node 1 holds nothing; node 0 is a switch";
  least.add(1, 500, 1000);
  EXPECT_EQ(least.pick(3, 10, kAll), 4);
}

TEST(ReplicaStore, ANodeWithoutRoomIsNotPicked) {
  ReplicaStore next = store(ReplicaPlacement::kNextNode);
  next.book(1, 600);
  EXPECT_EQ(next.pick(3, 400, kAll), 1) << "exactly the room left fits";
  EXPECT_EQ(next.pick(3, 401, kAll), 2) << "node 1 is full for this one: the next with room";
  next.book(2, 1000);
  EXPECT_EQ(next.pick(1, 1, kAll), 3);
  EXPECT_EQ(next.pick(3, 401, kAll), -1) << "no other GPU node has room";
  next.unbook(1, 600);
  EXPECT_EQ(next.pick(3, 1000, kAll), 1);
  ReplicaStore local = store(ReplicaPlacement::kLocal);
  local.book(2, 999);
  EXPECT_EQ(local.pick(2, 2, kAll), -1) << "local never spills to another node";
  EXPECT_THROW(local.book(2, 2), std::logic_error);
  EXPECT_THROW(local.unbook(3, 1), std::logic_error);
}

TEST(ReplicaStore, RandomBookingsNeverExceedAnyNodesRoom) {
  std::mt19937_64 rng(7);
  for (ReplicaPlacement p : {ReplicaPlacement::kNextNode, ReplicaPlacement::kLeastLoaded,
                             ReplicaPlacement::kLocal, ReplicaPlacement::kStorage}) {
    ReplicaStore s = store(p, 4);
    std::vector<std::pair<int, std::int64_t>> live;
    double peak = 0;
    for (int step = 0; step < 2000; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        const std::size_t k = rng() % live.size();
        s.unbook(live[k].first, live[k].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      const int gpu_node = 1 + static_cast<int>(rng() % 3);
      const std::int64_t bytes = 1 + static_cast<std::int64_t>(rng() % 400);
      const int node = s.pick(gpu_node, bytes, kAll);
      if (node < 0) continue;
      ASSERT_GE(s.capacity(node) - s.booked(node), bytes);
      s.book(node, bytes);
      live.emplace_back(node, bytes);
      for (int i = 1; i < 5; ++i) {
        ASSERT_LE(s.booked(i), s.capacity(i));
        if (s.capacity(i) > 0)
          peak = std::max(peak, static_cast<double>(s.booked(i)) / s.capacity(i));
      }
    }
    EXPECT_DOUBLE_EQ(s.peak_share(), peak);
    for (auto [node, bytes] : live) s.unbook(node, bytes);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.booked(i), 0) << "every booking given back";
  }
}

TEST(ReplicaStore, BooksHeldBytesAndThePeakWithItsFullEquivalent) {
  ReplicaStore s = store(ReplicaPlacement::kLeastLoaded);
  s.add(1, 100, 300);
  s.add(2, 50, 150);
  s.remove(1, 100, 300);
  s.add(2, 20, 60);
  EXPECT_EQ(s.held(2), 70);
  EXPECT_EQ(s.total(), 70);
  EXPECT_EQ(s.peak(), 150);
  EXPECT_EQ(s.peak_full_equiv(), 450);
  EXPECT_THROW(s.remove(3, 1, 1), std::logic_error);
}

}  // namespace
}  // namespace kvshift::sim
