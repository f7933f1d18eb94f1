// The network's completion heap: one simulator event serves every sharing
// flow; flows due at the same ns end in transfer-id order; a cancelled or
// re-shared flow leaves no event behind, so a run ends when its last transfer
// does; rate changes do not pile up events.
#include <gtest/gtest.h>

#include <vector>

#include "tests/sim/network_fixtures.hpp"

namespace kvshift::sim::testing {
namespace {

struct Order : NetworkObserver {
  std::vector<TransferId> done;
  void on_done(const TransferInfo& i) override { done.push_back(i.id); }
};

TEST(NetworkCompletions, FlowsDueAtTheSameNanosecondEndInIdOrder) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  Order order;
  net.add_observer(&order);
  // Id 2 joins first and sends 1 Gbit alone; from 1 s all three have 1 Gbit left at 1/3 Gbps
  // each, so they end together at 4 s.
  net.submit(req(0, 1, 125'000'000, seconds(1)));
  net.submit(req(0, 1, 125'000'000, seconds(1)));
  net.submit(req(0, 1, 250'000'000));
  sim.run();
  for (TransferId id = 0; id < 3; ++id) EXPECT_EQ(net.info(id).finish, seconds(4)) << id;
  EXPECT_EQ(order.done, (std::vector<TransferId>{0, 1, 2}));
}

TEST(NetworkCompletions, ACancelledFlowLeavesNoEventBehind) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const TransferId big = net.submit(req(0, 1, 1'250'000'000));  // 10 s alone
  sim.schedule_at(seconds(1), [&] { net.cancel(big); });
  sim.run();
  EXPECT_EQ(sim.now(), seconds(1)) << "the run ends with the cancel, not at the old due time";
  EXPECT_EQ(sim.pending_count(), 0u);
}

TEST(NetworkCompletions, RateChangesKeepOneNetworkEventPending) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  for (int k = 0; k < 50; ++k) net.submit(req(0, 1, 10'000'000 * (k + 1), milliseconds(k)));
  sim.run_until(milliseconds(60));  // every flow joined: 50 rate changes each
  EXPECT_EQ(net.active_count(), 50u);
  EXPECT_EQ(sim.pending_count(), 1u) << "one completion event for all the sharing flows";
  sim.run();
  EXPECT_EQ(sim.pending_count(), 0u);
}

}  // namespace
}  // namespace kvshift::sim::testing
