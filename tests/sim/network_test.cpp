// The flow-level network: closed form on idle paths, max-min sharing by hand,
// caps, duplex, latency-first, lifecycle, failures, conservation, properties.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "cost_model/input_error.hpp"
#include "cost_model/latency.hpp"
#include "sim/generators.hpp"
#include "sim/network.hpp"
#include "tests/sim/network_fixtures.hpp"

namespace kvshift::sim {
namespace {

using testing::chain;
using testing::EndCounter;
using testing::kGbps;
using testing::req;

TEST(Network, IdlePathFinishesAtTheCostModelClosedForm) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    const double b1 = 1e6 * static_cast<double>(1 + rng() % 100000);
    const double b2 = 1e6 * static_cast<double>(1 + rng() % 100000);
    const SimTime l1{static_cast<std::int64_t>(rng() % 5'000'000)};
    const SimTime l2{static_cast<std::int64_t>(rng() % 5'000'000)};
    Topology t = chain({b1, b2}, {l1, l2});
    Simulator sim;
    Network net(sim, t);
    const SimTime start{static_cast<std::int64_t>(rng() % 1'000'000'000)};
    const std::int64_t bytes = static_cast<std::int64_t>(rng() % 4'000'000'000LL);
    const TransferId id = net.submit(req(0, 2, bytes, start));
    sim.run();
    const TransferInfo& info = net.info(id);
    ASSERT_EQ(info.state, TransferState::kFinished);
    const cost_model::Path path{BitsPerSecond{std::min(b1, b2)}, (l1 + l2).to_seconds()};
    const Seconds closed = cost_model::transfer_time(Bytes{bytes}, path);
    // The documented rule: latency (whole ns) + round(8·S/B).
    EXPECT_EQ(info.finish, start + l1 + l2 + from_seconds(8.0 * bytes / std::min(b1, b2)));
    EXPECT_LE(std::llabs((info.finish - start - from_seconds(closed)).ns), 1);
    EXPECT_DOUBLE_EQ(info.delivered_bytes, static_cast<double>(bytes));
  }
}

TEST(Network, TwoFlowsShareALinkFairly) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const TransferId a = net.submit(req(0, 1, 125'000'000));
  const TransferId b = net.submit(req(0, 1, 125'000'000));
  sim.run_until(SimTime{1});
  EXPECT_EQ(net.info(a).rate_bps, 0.5 * kGbps);
  EXPECT_EQ(net.info(b).rate_bps, 0.5 * kGbps);
  sim.run();
  EXPECT_EQ(net.info(a).finish, seconds(2));
  EXPECT_EQ(net.info(b).finish, seconds(2));
}

TEST(Network, SurvivorSpeedsUpWhenTheOtherFlowEnds) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const TransferId a = net.submit(req(0, 1, 62'500'000));
  const TransferId b = net.submit(req(0, 1, 125'000'000));
  sim.run();
  EXPECT_EQ(net.info(a).finish, seconds(1));
  EXPECT_EQ(net.info(b).finish, milliseconds(1500));
}

TEST(Network, ParkingLotIsMaxMinFair) {
  // n0 -1G- n1 -2G- n2 -3G- n3: a long flow n0->n3 and one short flow per link.
  Topology t = chain({1 * kGbps, 2 * kGbps, 3 * kGbps});
  Simulator sim;
  Network net(sim, t);
  const std::int64_t gbit = 125'000'000;
  const TransferId lng = net.submit(req(0, 3, gbit));
  const TransferId s1 = net.submit(req(0, 1, gbit));
  const TransferId s2 = net.submit(req(1, 2, gbit));
  const TransferId s3 = net.submit(req(2, 3, gbit));
  sim.run_until(SimTime{1});
  EXPECT_EQ(net.info(lng).rate_bps, 0.5 * kGbps);
  EXPECT_EQ(net.info(s1).rate_bps, 0.5 * kGbps);
  EXPECT_EQ(net.info(s2).rate_bps, 1.5 * kGbps);
  EXPECT_EQ(net.info(s3).rate_bps, 2.5 * kGbps);
  sim.run();
  EXPECT_EQ(net.info(s3).finish, milliseconds(400));
  EXPECT_EQ(net.info(s2).finish, SimTime{666'666'667});
  EXPECT_EQ(net.info(lng).finish, seconds(2));
  EXPECT_EQ(net.info(s1).finish, seconds(2));
}

TEST(Network, ReshareTouchesOnlyTheAffectedComponent) {
  // Flows on L1 and on L3 share nothing: a change on L1 never recomputes L3's flow.
  Topology t = chain({1 * kGbps, 1 * kGbps, 1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  net.submit(req(0, 1, 125'000'000));
  const TransferId far = net.submit(req(2, 3, 125'000'000));
  sim.run_until(milliseconds(1));
  const std::uint64_t before = net.reshared_flows();
  const TransferId late = net.submit(req(0, 1, 1'000'000, milliseconds(1)));
  sim.run_until(milliseconds(2));
  EXPECT_EQ(net.reshared_flows() - before, 2u) << "only the two flows on L1";
  EXPECT_EQ(net.info(late).rate_bps, 0.5 * kGbps);
  EXPECT_EQ(net.info(far).rate_bps, 1 * kGbps);
  sim.run();
  EXPECT_EQ(net.info(far).finish, seconds(1));
}

TEST(Network, RateCapLimitsAFlowAndFreesCapacityForOthers) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  TransferRequest capped = req(0, 1, 25'000'000);
  capped.rate_cap = BitsPerSecond{0.2 * kGbps};
  const TransferId a = net.submit(capped);
  const TransferId b = net.submit(req(0, 1, 100'000'000));
  sim.run_until(SimTime{1});
  EXPECT_EQ(net.info(a).rate_bps, 0.2 * kGbps);
  EXPECT_EQ(net.info(b).rate_bps, 0.8 * kGbps);
  sim.run();
  EXPECT_EQ(net.info(a).finish, seconds(1));
  EXPECT_EQ(net.info(b).finish, seconds(1));
}

TEST(Network, FullDuplexDirectionsAreIndependentHalfDuplexShares) {
  for (const Duplex d : {Duplex::kFull, Duplex::kHalf}) {
    Topology t = chain({1 * kGbps}, {}, d);
    Simulator sim;
    Network net(sim, t);
    const TransferId fwd = net.submit(req(0, 1, 125'000'000));
    const TransferId back = net.submit(req(1, 0, 125'000'000));
    sim.run_until(SimTime{1});
    // route_of gives each the topology's route back, whichever way it crosses the link.
    for (const TransferId id : {fwd, back}) {
      const std::optional<Route> r = net.route_of(id);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->hops, t.route(net.info(id).src, net.info(id).dst)->hops);
      EXPECT_EQ(r->latency, t.route(net.info(id).src, net.info(id).dst)->latency);
    }
    sim.run();
    EXPECT_FALSE(net.route_of(fwd)) << "an ended transfer follows no route";
    const SimTime expected = d == Duplex::kFull ? seconds(1) : seconds(2);
    EXPECT_EQ(net.info(fwd).finish, expected);
    EXPECT_EQ(net.info(back).finish, expected);
  }
}

TEST(Network, LatencyIsPaidBeforeJoiningTheSharing) {
  // A starts at 0 on the 1G link (latency 0). B's route has 1 s of latency on an
  // extra hop, so B shares the 1G link only from t = 1 s.
  Topology t = chain({1 * kGbps, 10 * kGbps}, {SimTime{0}, seconds(1)});
  Simulator sim;
  Network net(sim, t);
  const TransferId a = net.submit(req(1, 0, 187'500'000));  // 1.5 Gbit over n1->n0
  const TransferId b = net.submit(req(2, 0, 62'500'000));   // 0.5 Gbit over n2->n1->n0
  sim.run();
  // 0..1 s: A alone (1 Gbit). 1..2 s: both at 0.5 (A done at 2 s, B done at 2 s).
  EXPECT_EQ(net.info(a).finish, seconds(2));
  EXPECT_EQ(net.info(b).finish, seconds(2));
}

TEST(Network, ZeroByteAndLocalTransfersFinishAfterTheirLatency) {
  Topology t = chain({1 * kGbps}, {milliseconds(3)});
  Simulator sim;
  Network net(sim, t);
  const TransferId empty = net.submit(req(0, 1, 0, milliseconds(1)));
  const TransferId local = net.submit(req(1, 1, 1'000'000, milliseconds(1)));
  sim.run();
  EXPECT_EQ(net.info(empty).finish, milliseconds(4));
  EXPECT_EQ(net.info(local).finish, milliseconds(1));
  EXPECT_EQ(net.info(local).state, TransferState::kFinished);
}

TEST(Network, EveryTransferEndsExactlyOnceAndCallbacksFire) {
  Topology t = chain({1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  EndCounter obs;
  net.add_observer(&obs);
  int callbacks = 0;
  TransferRequest r = req(0, 1, 1'000'000);
  r.on_done = [&](const TransferInfo& i) {
    ++callbacks;
    EXPECT_EQ(i.state, TransferState::kFinished);
    // A callback may start more work.
    net.submit(req(0, 1, 1'000, sim.now()));
  };
  net.submit(r);
  const TransferId pending = net.submit(req(0, 1, 1'000'000, seconds(5)));
  const TransferId running = net.submit(req(0, 1, 1'000'000'000));
  sim.run_until(milliseconds(1));
  EXPECT_EQ(net.active_count(), 3u);
  EXPECT_TRUE(net.cancel(pending, "no longer needed"));
  EXPECT_TRUE(net.cancel(running));
  EXPECT_FALSE(net.cancel(running)) << "already ended";
  sim.run();
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(net.info(pending).state, TransferState::kCancelled);
  EXPECT_EQ(net.info(pending).reason, "no longer needed");
  EXPECT_EQ(net.info(running).state, TransferState::kCancelled);
  EXPECT_GT(net.info(running).delivered_bytes, 0);
  EXPECT_EQ(net.transfer_count(), 4u);
  for (TransferId id = 0; id < net.transfer_count(); ++id) EXPECT_EQ(obs.ends[id], 1) << id;
  EXPECT_EQ(net.active_count(), 0u);
}

TEST(Network, BadRequestsAreRejected) {
  Topology t = chain({1 * kGbps, 1 * kGbps});
  Simulator sim;
  Network net(sim, t);
  EXPECT_THROW(net.submit(req(0, 9, 1)), InputError);
  EXPECT_THROW(net.submit(req(0, 1, -1)), InputError);
  TransferRequest cap = req(0, 1, 1);
  cap.rate_cap = BitsPerSecond{0};
  EXPECT_THROW(net.submit(cap), InputError);
  TransferRequest bad_route = req(0, 2, 1);
  bad_route.route = std::vector<LinkId>{1};
  EXPECT_THROW(net.submit(bad_route), InputError);
  bad_route.route = std::vector<LinkId>{0, 1, 0};
  EXPECT_THROW(net.submit(bad_route), InputError);
  bad_route.route = std::vector<LinkId>{77};
  EXPECT_THROW(net.submit(bad_route), InputError);
  EXPECT_EQ(net.transfer_count(), 0u) << "rejected requests leave nothing behind";
  sim.schedule_at(seconds(1), [] {});
  sim.run();
  EXPECT_THROW(net.submit(req(0, 1, 1, milliseconds(1))), InputError) << "start in the past";
}

// Random leaf-spine loads: conservation, capacity and "never faster than alone".
TEST(Network, RandomLoadsConserveBytesAndRespectCapacity) {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 10; ++round) {
    Cluster cluster;
    LeafSpineParams p;
    p.leaves = 3;
    p.spines = 2;
    p.nodes_per_leaf = 3;
    p.host = LinkParams{BitsPerSecond{10 * kGbps}, microseconds(2),
                        round % 2 ? Duplex::kHalf : Duplex::kFull};
    p.oversubscription = 1.5;
    const GeneratedNodes g = add_leaf_spine(cluster, p);
    Topology t(cluster);
    Simulator sim;
    Network net(sim, t);
    EndCounter obs;
    net.add_observer(&obs);
    std::vector<TransferId> ids;
    for (int k = 0; k < 60; ++k) {
      const NodeId s = g.gpus[rng() % g.gpus.size()];
      NodeId d = g.gpus[rng() % g.gpus.size()];
      if (d == s) d = g.gpus[(rng() % (g.gpus.size() - 1) + 1 + s) % g.gpus.size()];
      TransferRequest r = req(s, d, static_cast<std::int64_t>(1 + rng() % 50'000'000),
                              SimTime{static_cast<std::int64_t>(rng() % 100'000'000)});
      if (rng() % 5 == 0) r.rate_cap = BitsPerSecond{1e9 * static_cast<double>(1 + rng() % 8)};
      ids.push_back(net.submit(r));
    }
    sim.run();
    std::vector<double> expected_bytes(2 * t.link_count(), 0);
    for (const TransferId id : ids) {
      const TransferInfo& i = net.info(id);
      ASSERT_EQ(i.state, TransferState::kFinished);
      EXPECT_EQ(obs.ends[id], 1);
      EXPECT_DOUBLE_EQ(i.delivered_bytes, static_cast<double>(i.size.count));
      const Route* r = t.route(i.src, i.dst);
      const double alone = std::min(t.bottleneck(*r).value, 1e300);
      const SimTime lower = i.start + r->latency + from_seconds(i.size.bits() / alone);
      EXPECT_GE(i.finish.ns, lower.ns - 1) << "never faster than alone on the path";
      for (const Hop& h : r->hops)
        expected_bytes[t.channel(h)] += static_cast<double>(i.size.count);
    }
    for (LinkId l = 0; l < t.link_count(); ++l) {
      for (const bool fwd : {true, false}) {
        const ChannelStats st = net.channel_stats(l, fwd);
        const std::uint32_t c = t.channel(Hop{l, fwd});
        if (!fwd && c == t.channel(Hop{l, true})) continue;
        EXPECT_NEAR(st.bytes, expected_bytes[c], 1e-6 * expected_bytes[c] + 1e-3)
            << "link " << t.link(l).name << (fwd ? " fwd" : " back");
        SimTime last{-1};
        for (const RateSample& s : st.timeline) {
          EXPECT_LE(s.rate_bps, st.capacity_bps * (1 + 1e-12));
          EXPECT_GT(s.time, last) << "timeline is strictly increasing";
          last = s.time;
        }
        EXPECT_EQ(st.active_flows, 0u);
      }
    }
  }
}

TEST(Network, SameInputsGiveTheSameEventSequence) {
  auto run = [] {
    Cluster cluster;
    add_star(cluster, 6, LinkParams{BitsPerSecond{25 * kGbps}, microseconds(5)});
    Topology t(cluster);
    Simulator sim;
    Network net(sim, t);
    std::mt19937_64 rng(99);
    for (int k = 0; k < 100; ++k) {
      const NodeId s = 1 + rng() % 6, d = 1 + (s + rng() % 5) % 6;
      net.submit(req(s, d, static_cast<std::int64_t>(rng() % 10'000'000),
                     SimTime{static_cast<std::int64_t>(rng() % 10'000'000)}));
    }
    sim.run();
    std::vector<std::int64_t> out;
    for (TransferId id = 0; id < net.transfer_count(); ++id) out.push_back(net.info(id).finish.ns);
    out.push_back(static_cast<std::int64_t>(sim.executed_count()));
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace kvshift::sim
