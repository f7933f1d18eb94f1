// NetworkFabric's available bandwidth, the share a move planned now would get: it counts the
// flows in the sharing, those still paying their latency, and those sent in this instant that
// have yet to start, so a burst of moves planned at one instant sees itself (a star: every path
// crosses the source's link to the hub).
#include "sim/serving/network_fabric.hpp"

#include <gtest/gtest.h>

#include "sim/generators.hpp"

namespace kvshift::sim {
namespace {

constexpr double kGbps = 1e9;

TEST(NetworkFabric, AvailableBandwidthCountsFlowsSentThisInstantInTheirLatencyAndSharing) {
  ClusterSpec cluster;
  const GeneratedNodes star =
      add_star(cluster, 4, LinkParams{BitsPerSecond{8 * kGbps}, milliseconds(1)});
  Simulator sim;
  NetworkFabric fabric(sim, cluster, "h100");
  const NodeId g0 = star.gpus[0], g1 = star.gpus[1], g2 = star.gpus[2], g3 = star.gpus[3];
  auto share = [&](NodeId src, NodeId dst) {
    return fabric.available_bandwidth(src, dst).value / kGbps;
  };
  EXPECT_DOUBLE_EQ(share(g0, g1), 8);
  int done = 0;
  const Fabric::Done count = [&](bool ok, const std::string&) { done += ok; };
  fabric.send(g0, g1, Bytes{10'000'000}, count);  // 80 Mbit: 10 ms at 8 Gbps
  fabric.send(g0, g2, Bytes{10'000'000}, count);
  // Same instant, not started: both cross g0's link up; g3 -> g1 shares only g1's link down.
  EXPECT_DOUBLE_EQ(share(g0, g3), 8.0 / 3);
  EXPECT_DOUBLE_EQ(share(g3, g1), 8.0 / 2);
  EXPECT_DOUBLE_EQ(share(g3, g2), 8.0 / 2);
  EXPECT_DOUBLE_EQ(share(g1, g3), 8);
  sim.run_until(SimTime{500'000});  // started, paying their 2 ms (two hops of 1 ms)
  EXPECT_DOUBLE_EQ(share(g0, g3), 8.0 / 3);
  sim.run_until(milliseconds(5));  // in the sharing
  EXPECT_DOUBLE_EQ(share(g0, g3), 8.0 / 3);
  EXPECT_DOUBLE_EQ(share(g3, g1), 8.0 / 2);
  sim.run();
  EXPECT_EQ(done, 2);
  EXPECT_DOUBLE_EQ(share(g0, g3), 8);  // nothing left: the instant's list is gone too
}

}  // namespace
}  // namespace kvshift::sim
