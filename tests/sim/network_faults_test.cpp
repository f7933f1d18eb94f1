// The network under run-time changes: degraded, failed and repaired links,
// failed nodes, disconnected ends.
#include <gtest/gtest.h>

#include <map>

#include "cost_model/input_error.hpp"
#include "sim/generators.hpp"
#include "sim/network.hpp"
#include "tests/sim/network_fixtures.hpp"

namespace kvshift::sim {
namespace {

using testing::chain;
using testing::EndCounter;
using testing::kGbps;
using testing::req;

TEST(Network, DegradedLinkSlowsItsFlows) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const TransferId a = net.submit(req(0, 1, 125'000'000));  // 1 Gbit
  sim.schedule_at(milliseconds(500),
                  [&] { net.set_link_bandwidth(0, BitsPerSecond{0.25 * kGbps}); });
  sim.run();
  // 0.5 Gbit in the first 0.5 s, the other 0.5 Gbit at 0.25 Gbps: 2 s more.
  EXPECT_EQ(net.info(a).finish, milliseconds(2500));
}

TEST(Network, LatencyChangeReachesTransfersRoutedAfterIt) {
  Topology t = chain({8 * kGbps}, {milliseconds(10)});
  Simulator sim;
  Network net(sim, t);
  const TransferId before = net.submit(req(0, 1, 1'000'000'000));  // 1 s of transmission
  sim.schedule_at(milliseconds(100), [&] { net.set_link_latency(0, milliseconds(50)); });
  const TransferId after = net.submit(req(0, 1, 1'000, milliseconds(200)));
  sim.run();
  // `before` paid the old 10 ms; `after` pays 50 ms, enters at 250 ms and shares the link for
  // the 2 us its 8,000 bits take at 4 Gbps, which costs `before` 1 us.
  EXPECT_EQ(net.info(after).finish, SimTime{250'002'000});
  EXPECT_EQ(net.info(before).finish, SimTime{1'010'001'000});
  EXPECT_THROW(net.set_link_latency(0, SimTime{-5}), InputError);
}

// A flow paying its latency counts as joining every channel of its route (a move planned
// meanwhile sees it coming) until it joins, ends or is re-routed; the count never lingers.
TEST(Network, FlowsInTheirLatencyCountAsJoiningUntilTheyJoinEndOrReroute) {
  Cluster cluster;
  add_ring(cluster, 4, LinkParams{BitsPerSecond{1 * kGbps}, milliseconds(10)});
  Topology t(cluster);
  const NodeId g0 = *t.find_node("gpu0"), g1 = *t.find_node("gpu1");
  const LinkId direct = *t.find_link("gpu0-gpu1");
  auto no_joining_left = [&](const Network& net) {
    for (LinkId l = 0; l < t.link_count(); ++l) {
      EXPECT_EQ(net.channel_stats(l, true).joining_flows, 0u) << l;
      EXPECT_EQ(net.channel_stats(l, false).joining_flows, 0u) << l;
    }
  };
  {
    Simulator sim;
    Network net(sim, t);
    const TransferId joins = net.submit(req(g0, g1, 125'000));
    const TransferId cancelled = net.submit(req(g0, g1, 125'000));
    const TransferId rerouted = net.submit(req(g0, g1, 125'000'000));
    sim.run_until(milliseconds(5));  // all three routed, none through its latency yet
    EXPECT_EQ(net.channel_stats(direct, true).joining_flows, 3u);
    EXPECT_EQ(net.channel_stats(direct, true).active_flows, 0u);
    net.cancel(cancelled);
    EXPECT_EQ(net.channel_stats(direct, true).joining_flows, 2u);
    net.fail_link(direct);  // the two left go the long way round, joining its channels
    EXPECT_EQ(net.info(rerouted).reroutes, 1);
    EXPECT_EQ(net.channel_stats(direct, true).joining_flows, 0u);
    EXPECT_EQ(net.channel_stats(*t.find_link("gpu1-gpu2"), false).joining_flows, 2u);
    sim.run_until(milliseconds(100));  // both joined (three 10 ms hops)
    no_joining_left(net);
    EXPECT_EQ(net.channel_stats(*t.find_link("gpu1-gpu2"), false).active_flows, 1u);
    EXPECT_EQ(net.info(joins).state, TransferState::kFinished);
    sim.run();
    EXPECT_EQ(net.info(rerouted).state, TransferState::kFinished);
    no_joining_left(net);
  }
  {
    t.set_link_up(direct, true);
    Simulator sim;
    Network net(sim, t);
    const TransferId lost = net.submit(req(g0, g1, 125'000));
    sim.run_until(milliseconds(5));
    EXPECT_EQ(net.channel_stats(direct, true).joining_flows, 1u);
    net.fail_node(g1);  // ends it while it pays its latency
    EXPECT_EQ(net.info(lost).state, TransferState::kFailed);
    no_joining_left(net);
  }
}

TEST(Network, FailedLinkReroutesOrStallsAndRepairResumes) {
  Cluster cluster;
  add_ring(cluster, 4, LinkParams{BitsPerSecond{1 * kGbps}, SimTime{0}});
  Topology t(cluster);
  Simulator sim;
  Network net(sim, t);
  EndCounter obs;
  net.add_observer(&obs);
  const NodeId g0 = *t.find_node("gpu0"), g1 = *t.find_node("gpu1");
  const TransferId a = net.submit(req(g0, g1, 125'000'000));  // 1 Gbit via gpu0-gpu1
  const LinkId direct = *t.find_link("gpu0-gpu1");
  sim.schedule_at(milliseconds(500), [&] { net.fail_link(direct); });
  sim.run();
  EXPECT_EQ(obs.reroutes, 1);
  EXPECT_EQ(net.info(a).reroutes, 1);
  EXPECT_EQ(net.info(a).finish, seconds(1)) << "the long way round has the same bandwidth";
  EXPECT_NEAR(net.channel_stats(direct, true).bytes, 62'500'000, 1e-3);

  // Cut the ring twice: the transfer stalls with a reason, then resumes on repair.
  Simulator sim2;
  Network net2(sim2, t);
  net2.repair_link(direct);
  const LinkId other = *t.find_link("gpu1-gpu2");
  const TransferId b = net2.submit(req(g0, g1, 125'000'000));
  sim2.schedule_at(milliseconds(500), [&] {
    net2.fail_link(direct);
    net2.fail_link(other);
  });
  sim2.run_until(seconds(3));
  EXPECT_EQ(net2.info(b).state, TransferState::kRunning);
  EXPECT_EQ(net2.info(b).phase, TransferPhase::kStalled);
  EXPECT_NE(net2.info(b).reason.find("no route from gpu0 to gpu1"), std::string::npos)
      << net2.info(b).reason;
  sim2.schedule_at(seconds(4), [&] { net2.repair_link(other); });
  sim2.run();
  EXPECT_EQ(net2.info(b).state, TransferState::kFinished);
  EXPECT_EQ(net2.info(b).finish, milliseconds(4500));
  EXPECT_DOUBLE_EQ(net2.info(b).delivered_bytes, 125'000'000);
}

TEST(Network, NodeFailureFailsItsTransfersWithAReason) {
  Topology t = chain({1 * kGbps, 1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const TransferId to_dead = net.submit(req(0, 2, 125'000'000));
  const TransferId through = net.submit(req(0, 1, 125'000'000));
  sim.schedule_at(milliseconds(100), [&] { net.fail_node(2); });
  sim.run();
  EXPECT_EQ(net.info(to_dead).state, TransferState::kFailed);
  EXPECT_EQ(net.info(to_dead).reason, "node n2 failed");
  EXPECT_EQ(net.info(to_dead).finish, milliseconds(100));
  EXPECT_EQ(net.info(through).state, TransferState::kFinished);
  // 0.1 s at 0.5 Gbps, then 0.95 Gbit alone at 1 Gbps.
  EXPECT_EQ(net.info(through).finish, milliseconds(1050));
  // A transfer that starts while its destination is down fails at once.
  const TransferId late = net.submit(req(0, 2, 1000, seconds(2)));
  sim.run();
  EXPECT_EQ(net.info(late).state, TransferState::kFailed);
  EXPECT_EQ(net.info(late).reason, "node n2 is down");
  net.repair_node(2);
  const TransferId again = net.submit(req(0, 2, 125'000'000, seconds(3)));
  sim.run();
  EXPECT_EQ(net.info(again).finish, seconds(4));
}

TEST(Network, DisconnectedTransferStallsVisibly) {
  Topology t = chain({1 * kGbps});
  ClusterNode island;
  island.name = "island";
  const NodeId i = t.add_node(island);
  Simulator sim;
  Network net(sim, t);
  EndCounter obs;
  net.add_observer(&obs);
  const TransferId id = net.submit(req(0, i, 1000));
  sim.run();
  EXPECT_EQ(obs.stalls, 1);
  EXPECT_EQ(net.info(id).phase, TransferPhase::kStalled);
  EXPECT_EQ(net.info(id).reason, "no route from n0 to island");
  EXPECT_EQ(net.active_count(), 1u) << "still running, visibly stalled; the run ended anyway";
}

}  // namespace
}  // namespace kvshift::sim
