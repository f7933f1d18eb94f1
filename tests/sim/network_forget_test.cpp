// NetworkOptions::keep_ended = false: ended transfers' records are reused, and
// nothing else changes — the same rates, ends and callbacks as keeping them.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "sim/generators.hpp"
#include "sim/network.hpp"

namespace kvshift::sim {
namespace {

struct End {
  TransferId id;
  std::int64_t at_ns;
  TransferState state;
  double delivered;
  int reroutes;
  bool operator==(const End&) const = default;
};

struct Outcome {
  std::vector<End> ends;
  std::size_t records = 0, hops = 0, submitted = 0;
};

// A leaf-spine under Poisson-ish load: transfers that submit follow-ups from their
// callbacks, cancels of running and of already ended transfers, a spine link failing
// and coming back, a node failing.
Outcome run(bool keep_ended) {
  Cluster cluster;
  LeafSpineParams p;
  p.leaves = 4;
  p.spines = 2;
  p.nodes_per_leaf = 4;
  p.host.bandwidth = BitsPerSecond{10e9};
  p.host.latency = SimTime{2'000};
  const GeneratedNodes g = add_leaf_spine(cluster, p);
  Topology t(cluster);
  Simulator sim;
  NetworkOptions options;
  options.keep_ended = keep_ended;
  Network net(sim, t, options);
  Outcome out;
  std::mt19937_64 rng(11);
  std::vector<TransferId> submitted;
  std::function<void(std::int64_t, int)> submit = [&](std::int64_t at_ns, int depth) {
    TransferRequest r;
    r.src = g.gpus[rng() % g.gpus.size()];
    do {
      r.dst = g.gpus[rng() % g.gpus.size()];
    } while (r.dst == r.src);
    r.size = Bytes{static_cast<std::int64_t>(1'000 + rng() % 50'000'000)};
    r.start = SimTime{at_ns};
    r.on_done = [&, depth](const TransferInfo& i) {
      out.ends.push_back({i.id, sim.now().ns, i.state, i.delivered_bytes, i.reroutes});
      if (depth < 2 && i.id % 3 == 0) submit(sim.now().ns + 1'000, depth + 1);
    };
    submitted.push_back(net.submit(std::move(r)));
  };
  for (int i = 0; i < 3'000; ++i) {  // each submitted when it starts, as the serving model does
    const std::int64_t at = static_cast<std::int64_t>(i) * 2'000'000;
    sim.schedule_at(SimTime{at}, [&, at] { submit(at, 0); });
  }
  for (int k = 1; k <= 40; ++k) {
    sim.schedule_at(SimTime{std::int64_t{k} * 150'000'000}, [&, k] {
      net.cancel(submitted[static_cast<std::size_t>(k * 37) % submitted.size()], "test");
    });
  }
  const LinkId spine_link = t.link_count() - 1;  // a leaf-spine uplink
  sim.schedule_at(SimTime{1'000'000'000}, [&] { net.fail_link(spine_link); });
  sim.schedule_at(SimTime{2'000'000'000}, [&] { net.repair_link(spine_link); });
  sim.schedule_at(SimTime{3'000'000'000}, [&] { net.fail_node(g.gpus[5]); });
  sim.run();
  out.records = net.records_held();
  out.hops = net.hops_held();
  out.submitted = net.transfer_count();
  EXPECT_EQ(net.active_count(), 0u);
  return out;
}

TEST(NetworkForget, SameEndsAsKeepingEveryRecord) {
  const Outcome kept = run(true), forgot = run(false);
  ASSERT_GT(kept.ends.size(), 3'000u);
  EXPECT_EQ(kept.submitted, forgot.submitted);
  ASSERT_EQ(kept.ends.size(), forgot.ends.size());
  for (std::size_t i = 0; i < kept.ends.size(); ++i) {
    ASSERT_EQ(kept.ends[i], forgot.ends[i])
        << "end " << i << " (transfer " << kept.ends[i].id << ")";
  }
  // Every transfer ended exactly once.
  std::vector<int> ends(kept.submitted, 0);
  for (const End& e : forgot.ends) ++ends.at(e.id);
  for (std::size_t id = 0; id < ends.size(); ++id) ASSERT_EQ(ends[id], 1) << "transfer " << id;
  // Records and hops follow what was in flight at once, not the transfers the run had
  // (a route here has at most 4 hops; a record's hop region grows at most twice).
  EXPECT_EQ(kept.records, kept.submitted);
  EXPECT_LT(forgot.records, kept.submitted / 4);
  EXPECT_LE(forgot.hops, 6 * forgot.records);
  EXPECT_EQ(forgot.hops, kept.hops);
}

TEST(NetworkForget, AnEndedTransferIsGone) {
  Cluster cluster;
  const GeneratedNodes g = add_star(cluster, 2, {BitsPerSecond{1e9}, SimTime{0}});
  Topology t(cluster);
  Simulator sim;
  NetworkOptions options;
  options.keep_ended = false;
  Network net(sim, t, options);
  TransferRequest r;
  r.src = g.gpus[0];
  r.dst = g.gpus[1];
  r.size = Bytes{1'000};
  const TransferId a = net.submit(r);
  EXPECT_EQ(net.info(a).state, TransferState::kPending);
  sim.run();
  EXPECT_THROW(net.info(a), std::out_of_range);
  EXPECT_FALSE(net.cancel(a));
  EXPECT_FALSE(net.route_of(a));
  r.start = sim.now();
  const TransferId b = net.submit(r);  // reuses a's record, keeps its own id
  EXPECT_NE(a, b);
  EXPECT_EQ(net.records_held(), 1u);
  EXPECT_TRUE(net.cancel(b));
  EXPECT_THROW(net.info(12345), std::out_of_range);
}

}  // namespace
}  // namespace kvshift::sim
