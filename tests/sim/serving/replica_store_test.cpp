// The replica store: placement rules and the bytes it books, peak included.
#include "sim/serving/replica_store.hpp"

#include <gtest/gtest.h>

namespace kvshift::sim {
namespace {

const std::vector<NodeKind> kNodes = {NodeKind::kSwitch, NodeKind::kGpu, NodeKind::kGpu,
                                      NodeKind::kGpu, NodeKind::kStorage};
const auto kAll = [](int) { return true; };

TEST(ReplicaStore, EachPlacementPicksItsNodeAndNeverTheRequestsOwn) {
  EXPECT_EQ(ReplicaStore(kNodes, ReplicaPlacement::kStorage, 4).pick(1, kAll), 4);
  EXPECT_EQ(
      ReplicaStore(kNodes, ReplicaPlacement::kStorage, 4).pick(1, [](int i) { return i != 4; }),
      -1);
  EXPECT_EQ(ReplicaStore(kNodes, ReplicaPlacement::kNextNode, -1).pick(3, kAll), 1)
      << "the next GPU node, wrapping around, skipping the switch and the store";
  ReplicaStore least(kNodes, ReplicaPlacement::kLeastLoaded, 4);
  least.add(2, 100, 200);
  least.add(3, 50, 100);
  least.add(4, 70, 140);
  EXPECT_EQ(least.pick(3, kAll), 1) << "node 1 holds nothing; node 0 is a switch";
  least.add(1, 500, 1000);
  EXPECT_EQ(least.pick(3, kAll), 4);
}

TEST(ReplicaStore, BooksHeldBytesAndThePeakWithItsFullEquivalent) {
  ReplicaStore s(kNodes, ReplicaPlacement::kLeastLoaded, -1);
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
