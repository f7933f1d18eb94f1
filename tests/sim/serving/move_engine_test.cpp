// The move engine on its own, against a fake port and a fake fabric: a move's time is its
// legs and its GPU work, faults end it once with the reason, a stall hangs and resends it,
// one predictor fetch serves every move waiting for it, slots are given back, and over
// random faults every move ends exactly once.
#include "sim/serving/move_engine.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "tests/sim/serving/fake_fabric.hpp"
#include "tests/sim/serving/simple_costs.hpp"

namespace kvshift::sim {
namespace {

using cost_model::MovePlan;

struct NoListener final : GpuListener {
  void on_decoded(int, std::span<const DecodeState>, std::int64_t) override {}
  void on_finished(int, std::uint64_t) override {}
};

/// Node i has GPU i; node 0 holds the predictors (2 MB); host links copy 1 byte a ns.
class FakePort final : public MovePort {
 public:
  FakePort(Simulator& sim, int nodes) : predictors_(nodes, true) {
    for (int i = 0; i < nodes; ++i) {
      names_.push_back("n" + std::to_string(i));
      workers_.push_back(std::make_unique<GpuWorker>(sim, listener_, costs_, i, names_.back(), 8,
                                                     64, time_, nullptr));
    }
  }
  int node_of(int gpu) const override { return gpu; }
  const std::string& node_name(int node) const override {
    return names_[static_cast<std::size_t>(node)];
  }
  bool node_up(int) const override { return true; }
  GpuWorker& worker(int gpu) override { return *workers_[static_cast<std::size_t>(gpu)]; }
  SimTime host_copy(int, bool, std::int64_t bytes) override {
    return SimTime{sim_now_ ? sim_now_() + bytes : bytes};
  }
  SimTime host_link_time(std::int64_t bytes) const override { return SimTime{bytes}; }
  std::optional<EventKind> path_fault(int src, int dst) const override {
    const auto it = faults.find({src, dst});
    if (it == faults.end()) return std::nullopt;
    return it->second;
  }
  void when_stall_clears(int src, int dst, std::function<void()> resume) override {
    stalled[{src, dst}].push_back(std::move(resume));
  }
  PredictorCache& predictors(int) override { return predictors_; }
  std::int64_t predictor_bytes(int) const override { return 2'000'000; }
  int deployment_at(int) const override { return 0; }
  int predictor_source() const override { return 0; }
  cost_model::MoveRoute route(const MovePlan& plan, int src, int dst_node) override {
    return cost_model::make_route(plan, src, 0, dst_node, BitsPerSecond{8e9},
                                  [](int, int) -> std::optional<cost_model::Path> {
                                    return cost_model::Path{BitsPerSecond{1e9}, Seconds{1e-3}};
                                  });
  }
  int storage_node() const override { return -1; }
  std::int64_t storage_block_bytes() const override { return 0; }
  void record(const MoveRecord& rec) override { records.push_back(rec); }
  void slot_freed() override { ++slots_freed; }
  void move_ended(const MoveEnding& e) override { endings.push_back(e); }

  /// Clears the stall on src -> dst: what hung there starts again.
  void clear_stall(int src, int dst) {
    faults.erase({src, dst});
    auto hung = std::move(stalled[{src, dst}]);
    stalled.erase({src, dst});
    for (auto& f : hung) f();
  }

  std::function<std::int64_t()> sim_now_;
  std::map<std::pair<int, int>, EventKind> faults;
  std::map<std::pair<int, int>, std::vector<std::function<void()>>> stalled;
  std::vector<MoveRecord> records;
  std::vector<MoveEnding> endings;
  int slots_freed = 0;

 private:
  NoListener listener_;
  SimpleServingCosts simple_;
  const ServingCosts& costs_ = simple_.costs;
  GpuTime time_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<GpuWorker>> workers_;
  PredictorCache predictors_;
};

struct Bench {
  explicit Bench(int nodes = 3, MoveEngineConfig config = {})
      : fabric(sim),
        port(sim, nodes),
        engine(sim, fabric, port, result, with_nodes(config, nodes)) {
    port.sim_now_ = [this] { return sim.now().ns; };
  }
  static MoveEngineConfig with_nodes(MoveEngineConfig c, int nodes) {
    c.nodes = static_cast<std::size_t>(nodes);
    if (c.end_ns == 0) c.end_ns = 60'000'000'000;
    return c;
  }
  /// A move of `request` from node `src` to GPU `dst` shipping `kv` bytes.
  MoveOrder order(std::uint64_t request, int src, int dst, std::int64_t kv,
                  Strategy s = Strategy::kFullKv) {
    MoveOrder o;
    o.request = request;
    o.plan.strategy = s;
    o.plan.kv = Bytes{kv};
    o.src = src;
    o.dst_gpu = dst;
    o.rec.request = request;
    o.rec.to = "n" + std::to_string(dst);
    o.rec.start_ns = sim.now().ns;
    return o;
  }
  Simulator sim;
  FakeFabric fabric;
  FakePort port;
  RunResult result;
  MoveEngine engine;
};

TEST(MoveEngine, AKvMoveTakesItsLegAndEndsDoneOnceWithItsBytesCounted) {
  Bench b;
  b.engine.start(b.order(7, 0, 1, 1'000'000));
  EXPECT_TRUE(b.engine.moving(7));
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 1u);
  const MoveRecord& r = b.port.records[0];
  EXPECT_EQ(r.outcome, MoveOutcome::kDone);
  EXPECT_EQ(r.end_ns, 1'000'000 + 8'000'000) << "1 ms latency, then 8 Mbit at 1 Gbps";
  EXPECT_EQ(r.transfer_ns, 9'000'000);
  EXPECT_EQ(r.kv_bytes, 1'000'000);
  EXPECT_EQ(b.result.bytes.kv, 1'000'000);
  ASSERT_EQ(b.port.endings.size(), 1u);
  EXPECT_EQ(b.port.endings[0].request, 7u);
  EXPECT_FALSE(b.engine.moving(7));
}

TEST(MoveEngine, ARequestNeverHasTwoMovesInFlight) {
  Bench b;
  b.engine.start(b.order(7, 0, 1, 1000));
  EXPECT_THROW(b.engine.start(b.order(7, 2, 1, 1000)), std::logic_error);
  b.sim.run();
  EXPECT_EQ(b.port.records.size(), 1u);
}

TEST(MoveEngine, GpuWorkRunsOnTheDestinationAfterTheBytes) {
  Bench b;
  MoveOrder o = b.order(1, 0, 2, 1'000'000, Strategy::kRiskKv);
  o.plan.reconstruct_tokens = 1000;
  b.port.predictors(0).preload(2);  // resident: no fetch
  b.engine.start(std::move(o));
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 1u);
  const MoveRecord& r = b.port.records[0];
  EXPECT_EQ(r.outcome, MoveOutcome::kDone);
  EXPECT_EQ(r.transfer_ns, 9'000'000);
  EXPECT_GT(r.compute_ns, 0);
  EXPECT_EQ(r.end_ns, r.transfer_ns + r.queue_ns + r.compute_ns);
  EXPECT_EQ(b.result.predictor_uses.at("n2"), 1) << "a done RISK-KV rebuild uses the copy";
  EXPECT_EQ(r.predictor_bytes, 0);
}

TEST(MoveEngine, OnePredictorFetchServesEveryMoveWaitingAndTheFirstCarriesItsBytes) {
  Bench b;
  for (std::uint64_t request : {1, 2}) {
    b.engine.start(b.order(request, 1, 2, 1000, Strategy::kRiskKv));
  }
  EXPECT_EQ(b.port.predictors(0).state(2), PredictorCache::State::kFetching);
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 2u);
  EXPECT_EQ(b.port.records[0].predictor_bytes + b.port.records[1].predictor_bytes, 2'000'000);
  EXPECT_EQ(b.result.bytes.predictors, 2'000'000);
  EXPECT_EQ(b.result.predictor_bytes_unclaimed, 0);
  EXPECT_EQ(b.result.predictor_uses.at("n2"), 2);
  for (const MoveRecord& r : b.port.records) {
    EXPECT_EQ(r.outcome, MoveOutcome::kDone);
    EXPECT_GE(r.end_ns, 1'000'000 + 16'000'000) << "after the 2 MB copy, not the 1 kB KV";
  }
}

TEST(MoveEngine, AFailedPathFailsTheMovesSendingOverItOnceAndCancelsTheirFlows) {
  Bench b;
  b.engine.start(b.order(1, 0, 1, 1'000'000));
  b.engine.start(b.order(2, 2, 1, 1'000'000));  // another path
  b.sim.run_until(SimTime{500'000});
  b.engine.fail_path(0, 1);
  EXPECT_EQ(b.fabric.cancelled, 1);
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 2u);
  EXPECT_EQ(b.port.records[0].request, 1u);
  EXPECT_EQ(b.port.records[0].outcome, MoveOutcome::kFailed);
  EXPECT_EQ(b.port.records[0].note, "the path n0 -> n1 failed");
  EXPECT_EQ(b.port.records[0].end_ns, 500'000);
  EXPECT_EQ(b.port.records[1].outcome, MoveOutcome::kDone);
  EXPECT_EQ(b.result.bytes.kv, 1'000'000) << "only what arrived is counted";
}

TEST(MoveEngine, AStallHangsTheFlowAndResendsItWholeWhenItClears) {
  Bench b;
  b.engine.start(b.order(1, 0, 1, 1'000'000));
  b.sim.run_until(SimTime{2'000'000});
  b.port.faults[{0, 1}] = EventKind::kPathStall;
  b.engine.stall_path(0, 1);
  b.sim.run_until(SimTime{20'000'000});
  EXPECT_TRUE(b.port.records.empty()) << "it hangs while the path is stalled";
  b.port.clear_stall(0, 1);
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 1u);
  EXPECT_EQ(b.port.records[0].outcome, MoveOutcome::kDone);
  EXPECT_EQ(b.port.records[0].end_ns, 20'000'000 + 9'000'000) << "posted again whole";
  EXPECT_EQ(b.fabric.sent, 2);
}

TEST(MoveEngine, AStallWithATimeoutFailsTheMoveThen) {
  MoveEngineConfig c;
  c.stall_timeout = Seconds{0.05};
  Bench b(3, c);
  b.port.faults[{0, 1}] = EventKind::kPathStall;
  b.engine.start(b.order(1, 0, 1, 1000));
  b.sim.run();
  ASSERT_EQ(b.port.records.size(), 1u);
  EXPECT_EQ(b.port.records[0].outcome, MoveOutcome::kFailed);
  EXPECT_EQ(b.port.records[0].end_ns, 50'000'000);
  EXPECT_NE(b.port.records[0].note.find("stalled on n0 -> n1: timed out after"), std::string::npos)
      << b.port.records[0].note;
}

TEST(MoveEngine, ASlotIsHeldWhileTheBytesTravelAndGivenBackOnce) {
  MoveEngineConfig c;
  c.max_inflight_per_destination = 1;
  Bench b(3, c);
  EXPECT_TRUE(b.engine.slot_free(1));
  b.engine.start(b.order(1, 0, 1, 1000));
  EXPECT_FALSE(b.engine.slot_free(1));
  EXPECT_TRUE(b.engine.slot_free(2));
  b.sim.run();
  EXPECT_TRUE(b.engine.slot_free(1));
  EXPECT_EQ(b.port.slots_freed, 1);
}

TEST(MoveEngine, DrainsCancelAndGpuFailuresFailWhatTouchesThem) {
  Bench b(4);
  b.engine.start(b.order(5, 0, 1, 1000));
  b.engine.start(b.order(3, 2, 1, 1000));
  MoveOrder leaving = b.order(4, 3, 2, 1000);
  leaving.src_gpu = 3;
  b.engine.start(std::move(leaving));
  b.engine.cancel_into(1, "destination n1 started draining");
  ASSERT_EQ(b.port.endings.size(), 2u);
  EXPECT_EQ(b.port.endings[0].request, 3u) << "in request order";
  EXPECT_EQ(b.port.endings[0].outcome, MoveOutcome::kCancelled);
  const std::vector<std::uint64_t> broken =
      b.engine.fail_touching([](int gpu) { return gpu == 3; }, "GPU n3 failed");
  EXPECT_EQ(broken, std::vector<std::uint64_t>{4});
  EXPECT_EQ(b.port.endings.back().outcome, MoveOutcome::kFailed);
  EXPECT_EQ(b.fabric.in_flight(), 0u);
  b.sim.run();
  EXPECT_EQ(b.port.records.size(), 3u) << "nothing ends twice";
}

TEST(MoveEngine, MovesInFlightAtTheEndAreUnfinishedWithWhatTheyWereDoing) {
  MoveEngineConfig c;
  c.end_ns = 5'000'000;
  Bench b(3, c);
  MoveOrder o = b.order(9, 0, 1, 1'000'000);
  o.stall_since = -1'000'000;
  b.engine.start(std::move(o));
  b.sim.run_until(SimTime{5'000'000});
  std::map<std::uint64_t, std::string> what;
  b.engine.close([&](std::uint64_t r, const std::string& w) { what[r] = w; });
  ASSERT_EQ(b.port.records.size(), 1u);
  EXPECT_EQ(b.port.records[0].outcome, MoveOutcome::kUnfinished);
  EXPECT_EQ(b.port.records[0].end_ns, 5'000'000);
  EXPECT_EQ(b.port.records[0].stall_ns, 6'000'000);
  EXPECT_EQ(b.port.records[0].note, "still transferring at the end of the run");
  EXPECT_EQ(what[9], "transferring");
  EXPECT_TRUE(b.port.endings.empty()) << "the end of the run is not a move's end";
}

TEST(MoveEngine, UnderRandomFaultsEveryMoveEndsExactlyOnceAndTimeNeverRunsBackwards) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    MoveEngineConfig c;
    c.max_inflight_per_destination = static_cast<int>(rng() % 3);  // 0: no cap
    if (rng() % 2) c.stall_timeout = Seconds{0.004};
    c.end_ns = 200'000'000;
    Bench b(4, c);
    std::uint64_t next = 1;
    std::set<std::uint64_t> started;
    std::function<void()> tick = [&] {
      const int src = static_cast<int>(rng() % 4), dst = static_cast<int>(rng() % 4);
      switch (rng() % 8) {
        case 0:
        case 1:
        case 2: {
          if (src == dst || !b.engine.slot_free(dst)) break;
          const Strategy s = rng() % 3 == 0 ? Strategy::kRiskKv : Strategy::kFullKv;
          MoveOrder o = b.order(next, src, dst, static_cast<std::int64_t>(rng() % 2'000'000), s);
          o.plan.reconstruct_tokens = s == Strategy::kRiskKv ? 100 : 0;
          started.insert(next++);
          b.engine.start(std::move(o));
          break;
        }
        case 3:
          b.port.faults[{src, dst}] = EventKind::kPathStall;
          b.engine.stall_path(src, dst);
          break;
        case 4:
          b.port.clear_stall(src, dst);
          break;
        case 5:
          if (rng() % 2) {
            b.port.faults[{src, dst}] = EventKind::kPathFailure;
            b.engine.fail_path(src, dst);
          } else {
            b.port.faults.erase({src, dst});
          }
          break;
        case 6:
          b.engine.cancel_into(dst, "drain");
          break;
        case 7:
          b.engine.fail_touching([&](int gpu) { return gpu == src; }, "GPU failed");
          break;
      }
      if (b.sim.now().ns < 150'000'000) b.sim.schedule_after(SimTime{1'000'000}, tick);
    };
    b.sim.schedule_at(SimTime{0}, tick);
    b.sim.run_until(SimTime{c.end_ns});
    b.engine.close([](std::uint64_t, const std::string&) {});
    std::map<std::uint64_t, int> ends;
    for (const MoveRecord& r : b.port.records) {
      ++ends[r.request];
      EXPECT_GE(r.end_ns, r.start_ns) << "seed " << seed;
      EXPECT_LE(r.end_ns, c.end_ns) << "seed " << seed;
      if (r.outcome == MoveOutcome::kDone) {
        EXPECT_GE(r.transfer_ns, 0) << "seed " << seed;
        EXPECT_LE(r.start_ns + r.transfer_ns, r.end_ns) << "seed " << seed;
      }
    }
    EXPECT_EQ(ends.size(), started.size()) << "seed " << seed;
    for (const auto& [request, n] : ends) {
      EXPECT_EQ(n, 1) << "request " << request << " seed " << seed;
      EXPECT_TRUE(started.count(request));
    }
  }
}

}  // namespace
}  // namespace kvshift::sim
