#include <gtest/gtest.h>

#include "sim/serving/gpu_worker.hpp"
#include "tests/sim/serving/simple_costs.hpp"

namespace kvshift::sim {
namespace {

struct Recorder final : GpuListener {
  std::vector<std::pair<std::uint64_t, std::int64_t>> finished;  // (request, time)
  std::int64_t tokens = 0;
  Simulator* sim = nullptr;
  void on_decoded(int, std::span<const DecodeState> batch, std::int64_t steps) override {
    tokens += steps * static_cast<std::int64_t>(batch.size());
  }
  void on_finished(int, std::uint64_t r) override { finished.emplace_back(r, sim->now().ns); }
};

struct Fixture {
  Simulator sim;
  Recorder rec;
  SimpleServingCosts simple;
  const ServingCosts& costs = simple.costs;
  GpuTime time;
  GpuWorker gpu{sim, rec, costs, 0, "gpu", 8, 64, time, nullptr};
  Fixture() { rec.sim = &sim; }
};

TEST(GpuWorker, DecodesInWholeStepsAndFinishesOnTime) {
  Fixture f;
  f.gpu.add_decoding({1, 100, 10});
  f.gpu.add_decoding({2, 100, 25});
  f.sim.run();
  ASSERT_EQ(f.rec.finished.size(), 2u);
  EXPECT_EQ(f.rec.finished[0], (std::pair<std::uint64_t, std::int64_t>{1, 10'000'000}));
  EXPECT_EQ(f.rec.finished[1], (std::pair<std::uint64_t, std::int64_t>{2, 25'000'000}));
  EXPECT_EQ(f.rec.tokens, 35);  // every token once, nothing lost or doubled
  EXPECT_EQ(f.time.decode, 25'000'000);
}

TEST(GpuWorker, AJobWaitsOnlyForTheStepInFlight) {
  Fixture f;
  f.gpu.add_decoding({1, 100, 50});
  std::int64_t job_start = -1, job_end = -1;
  f.sim.schedule_at(SimTime{2'500'000}, [&] {
    f.gpu.submit({JobKind::kReplay, 9, 1000, [&](SimTime s, SimTime e) {
                    job_start = s.ns;
                    job_end = e.ns;
                  }});
  });
  f.sim.run();
  EXPECT_EQ(job_start, 3'000'000);  // the step running at 2.5 ms ends at 3 ms
  EXPECT_EQ(job_end, 4'000'000);    // 1000 tokens at 1 µs
  ASSERT_EQ(f.rec.finished.size(), 1u);
  EXPECT_EQ(f.rec.finished[0].second, 51'000'000);  // 50 steps + 1 ms of replay
}

TEST(GpuWorker, QueuedReconstructionsShareOneBatch) {
  Fixture f;
  int done = 0;
  std::int64_t end = 0;
  f.gpu.submit({JobKind::kPrefill, 1, 500, [](SimTime, SimTime) {}});
  for (std::uint64_t r = 2; r < 5; ++r) {
    f.gpu.submit({JobKind::kReconstruct, r, 100, [&](SimTime, SimTime e) {
                    ++done;
                    end = e.ns;
                  }});
  }
  f.sim.run();
  EXPECT_EQ(done, 3);
  EXPECT_EQ(end, 500'000 + 600'000);  // one GEMM of 3·100 rows at 2 µs per row
  EXPECT_EQ(f.time.reconstruct, 600'000);
}

TEST(GpuWorker, LeavingMidEpochKeepsTheCompletedSteps) {
  Fixture f;
  f.gpu.add_decoding({1, 100, 40});
  std::optional<DecodeState> left;
  f.sim.schedule_at(SimTime{7'400'000}, [&] { left = f.gpu.remove_decoding(1); });
  f.sim.run();
  ASSERT_TRUE(left);
  EXPECT_EQ(left->context, 107);
  EXPECT_EQ(left->remaining, 33);
  EXPECT_TRUE(f.rec.finished.empty());
}

TEST(GpuWorker, FailureDropsEverythingItHeld) {
  Fixture f;
  f.gpu.add_decoding({1, 100, 40});
  f.gpu.submit(
      {JobKind::kPrefill, 2, 500, [](SimTime, SimTime) { FAIL() << "ran after failure"; }});
  std::vector<std::uint64_t> lost;
  f.sim.schedule_at(SimTime{100}, [&] { lost = f.gpu.fail(); });
  f.sim.run();
  EXPECT_EQ(lost, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_FALSE(f.gpu.up());
  EXPECT_TRUE(f.rec.finished.empty());
}

// The steps that ended before a failure produced their tokens (the client has them): the
// owner hears of them before the GPU's work is dropped; the step in flight is lost. Without
// this, a failure mid-epoch lost up to an epoch (64 steps) of every request's progress.
TEST(GpuWorker, AFailureMidEpochKeepsTheStepsThatEnded) {
  for (const std::int64_t at : {0LL, 999'999LL, 7'400'000LL, 39'500'000LL}) {
    Fixture f;
    f.gpu.add_decoding({1, 100, 40});
    f.gpu.add_decoding({2, 300, 60});
    std::vector<std::uint64_t> lost;
    f.sim.schedule_at(SimTime{at}, [&] { lost = f.gpu.fail(); });
    f.sim.run();
    const std::int64_t steps = at / 1'000'000;  // 1 ms per step; none of the batch finished
    EXPECT_EQ(f.rec.tokens, 2 * steps) << at;
    EXPECT_EQ(f.time.decode, steps * 1'000'000) << at << ": busy only for the steps that ended";
    EXPECT_EQ(lost, (std::vector<std::uint64_t>{1, 2})) << at;
    EXPECT_TRUE(f.rec.finished.empty()) << at;
  }
}

TEST(GpuWorker, BusyTimeStopsAtTheHorizonAndAtAFailure) {
  Fixture f;
  f.gpu.set_horizon(SimTime{1'500'000});           // the run ends 1.5 ms in
  f.gpu.submit({JobKind::kPrefill, 1, 2000, {}});  // a 2 ms prefill
  f.sim.run();
  EXPECT_EQ(f.time.prefill, 1'500'000) << "busy time never passes the end of the run";
  Fixture g;
  g.gpu.submit({JobKind::kReplay, 1, 1000, {}});  // 1 ms
  g.sim.run_until(SimTime{400'000});
  g.gpu.fail();
  EXPECT_EQ(g.time.replay, 400'000) << "the part a failure cuts off never ran";
}

TEST(GpuWorker, CancelledJobsNeverRunAndOthersKeepTheirOrder) {
  Fixture f;
  std::vector<std::uint64_t> ran;
  auto note = [&](std::uint64_t r) { return [&ran, r](SimTime, SimTime) { ran.push_back(r); }; };
  f.gpu.submit({JobKind::kReplay, 1, 100, note(1)});
  f.gpu.submit({JobKind::kReplay, 2, 100, note(2)});
  f.gpu.submit({JobKind::kReplay, 3, 100, note(3)});
  f.gpu.submit({JobKind::kReplay, 2, 100, note(2)});
  f.gpu.cancel_jobs(2);
  f.sim.run();
  EXPECT_EQ(ran, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(f.time.replay, 200'000);
}

}  // namespace
}  // namespace kvshift::sim
