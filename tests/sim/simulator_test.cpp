// The event engine: ordering, cancellation, clock rules, pooling.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.hpp"

namespace kvshift::sim {
namespace {

TEST(EventQueue, SameTimeEventsRunInSchedulingOrder) {
  Simulator sim;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) sim.schedule_at(SimTime{5}, [&order, i] { order.push_back(i); });
  sim.run();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(EventQueue, EventsRunInTimeOrder) {
  Simulator sim;
  std::vector<std::int64_t> times;
  for (std::int64_t t : {30, 10, 20, 10, 0}) {
    sim.schedule_at(SimTime{t}, [&] { times.push_back(sim.now().ns); });
  }
  sim.run();
  EXPECT_EQ(times, (std::vector<std::int64_t>{0, 10, 10, 20, 30}));
  EXPECT_EQ(sim.now(), SimTime{30});
  EXPECT_EQ(sim.executed_count(), 5u);
}

TEST(EventQueue, CancelledEventNeverRuns) {
  Simulator sim;
  int ran = 0;
  const EventId a = sim.schedule_at(SimTime{1}, [&] { ran += 1; });
  sim.schedule_at(SimTime{2}, [&] { ran += 10; });
  EXPECT_TRUE(sim.is_pending(a));
  EXPECT_TRUE(sim.cancel(a));
  EXPECT_FALSE(sim.is_pending(a));
  EXPECT_FALSE(sim.cancel(a)) << "second cancel is a no-op";
  EXPECT_EQ(sim.pending_count(), 1u);
  sim.run();
  EXPECT_EQ(ran, 10);
}

TEST(EventQueue, StaleHandleDoesNotCancelARecycledSlot) {
  Simulator sim;
  int ran = 0;
  const EventId a = sim.schedule_at(SimTime{1}, [&] { ++ran; });
  sim.run();
  const EventId b = sim.schedule_at(SimTime{2}, [&] { ++ran; });
  EXPECT_EQ(a.slot, b.slot) << "the pool recycles the slot";
  EXPECT_FALSE(sim.cancel(a));
  sim.run();
  EXPECT_EQ(ran, 2);
}

TEST(EventQueue, EventCanCancelAndScheduleOthers) {
  Simulator sim;
  std::vector<int> seen;
  EventId later = sim.schedule_at(SimTime{10}, [&] { seen.push_back(10); });
  sim.schedule_at(SimTime{5}, [&] {
    seen.push_back(5);
    EXPECT_TRUE(sim.cancel(later));
    sim.schedule_after(SimTime{1}, [&] { seen.push_back(6); });
    sim.schedule_after(SimTime{0}, [&] { seen.push_back(55); });
  });
  sim.run();
  EXPECT_EQ(seen, (std::vector<int>{5, 55, 6}));
}

TEST(EventQueue, SchedulingInThePastIsAnError) {
  Simulator sim;
  sim.schedule_at(SimTime{100}, [] {});
  sim.run();
  EXPECT_THROW(sim.schedule_at(SimTime{99}, [] {}), std::logic_error);
  EXPECT_THROW(sim.schedule_after(SimTime{-1}, [] {}), std::logic_error);
}

TEST(EventQueue, RunUntilStopsAtTheBoundaryAndAdvancesTheClock) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(SimTime{10}, [&] { ++ran; });
  sim.schedule_at(SimTime{20}, [&] { ++ran; });
  sim.schedule_at(SimTime{21}, [&] { ++ran; });
  sim.run_until(SimTime{20});
  EXPECT_EQ(ran, 2) << "events at exactly the boundary run";
  EXPECT_EQ(sim.now(), SimTime{20});
  sim.run_until(SimTime{500});
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(sim.now(), SimTime{500});
}

TEST(EventQueue, EventsScheduledAfterRunUntilKeepTheirOrder) {
  Simulator sim;
  std::vector<std::int64_t> times;
  auto record = [&] { times.push_back(sim.now().ns); };
  sim.schedule_at(SimTime{0}, record);
  sim.schedule_at(seconds(5), record);
  sim.schedule_at(milliseconds(8), record);
  sim.run_until(milliseconds(1));
  sim.schedule_after(SimTime{5}, record);  // between now and the next pending event
  sim.schedule_after(SimTime{0}, record);
  EXPECT_EQ(sim.next_time(), milliseconds(1));
  sim.run();
  EXPECT_EQ(times, (std::vector<std::int64_t>{0, 1'000'000, 1'000'005, 8'000'000, 5'000'000'000}));
}

TEST(EventQueue, StopEndsRunAfterTheCurrentEvent) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(SimTime{1}, [&] {
    ++ran;
    sim.stop();
  });
  sim.schedule_at(SimTime{2}, [&] { ++ran; });
  sim.run();
  EXPECT_EQ(ran, 1);
  sim.run();
  EXPECT_EQ(ran, 2);
}

TEST(EventQueue, LargeCallablesAndOwnedStateAreDestroyed) {
  auto token = std::make_shared<int>(7);
  {
    Simulator sim;
    std::array<double, 32> big{};  // larger than the inline buffer: boxed
    big[3] = 1.5;
    double seen = 0;
    sim.schedule_at(SimTime{1}, [big, &seen] { seen = big[3]; });
    sim.schedule_at(SimTime{2}, [token] {});
    const EventId c = sim.schedule_at(SimTime{3}, [token] {});
    sim.schedule_at(SimTime{4}, [token] {});  // still pending when sim is destroyed
    EXPECT_EQ(token.use_count(), 4);
    sim.cancel(c);
    EXPECT_EQ(token.use_count(), 3) << "cancel releases the callable at once";
    sim.run_until(SimTime{3});
    EXPECT_EQ(seen, 1.5);
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(EventQueue, ThrowingEventLeavesTheQueueUsable) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(SimTime{1}, [] { throw std::runtime_error("boom"); });
  sim.schedule_at(SimTime{2}, [&] { ++ran; });
  EXPECT_THROW(sim.run(), std::runtime_error);
  sim.run();
  EXPECT_EQ(ran, 1);
}

// Property: random schedules and cancels match a brute-force model ordered by (time, seq).
TEST(EventQueue, RandomScheduleAndCancelMatchesASortedReference) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    Simulator sim;
    struct Ref {
      std::int64_t t;
      int seq;
      bool cancelled;
    };
    std::vector<Ref> ref;
    std::vector<EventId> ids;
    std::vector<int> ran;
    for (int i = 0; i < 2000; ++i) {
      const std::int64_t t = static_cast<std::int64_t>(rng() % 500);
      ids.push_back(sim.schedule_at(SimTime{t}, [&ran, i] { ran.push_back(i); }));
      ref.push_back({t, i, false});
      if (rng() % 10 < 3) {
        const std::size_t victim = rng() % ids.size();
        EXPECT_EQ(sim.cancel(ids[victim]), !ref[victim].cancelled);
        ref[victim].cancelled = true;
      }
    }
    std::vector<Ref> expected;
    for (const Ref& r : ref) {
      if (!r.cancelled) expected.push_back(r);
    }
    std::stable_sort(expected.begin(), expected.end(),
                     [](const Ref& a, const Ref& b) { return a.t < b.t; });
    EXPECT_EQ(sim.pending_count(), expected.size());
    SimTime last{};
    std::size_t k = 0;
    while (sim.step()) {
      EXPECT_GE(sim.now(), last) << "time is monotone";
      last = sim.now();
      ASSERT_LT(k, expected.size());
      EXPECT_EQ(sim.now().ns, expected[k].t);
      ++k;
    }
    ASSERT_EQ(ran.size(), expected.size());
    for (std::size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], expected[i].seq);
  }
}

// The same random program on the engine and on a brute-force queue ordered by (time, seq):
// events schedule and cancel others (some at now, some between now and the next pending
// event), and the driver runs it in run_until slices of random length. Both logs agree.
TEST(EventQueue, RunUntilSlicesMatchASortedReference) {
  struct RefSim {  // the reference: a map ordered by (time, scheduling order)
    std::int64_t now = 0, seq = 0;
    std::map<std::pair<std::int64_t, std::int64_t>, std::function<void()>> queue;
    std::int64_t schedule_at(std::int64_t t, std::function<void()> fn) {
      queue.emplace(std::pair{t, seq}, std::move(fn));
      return seq++;
    }
    void cancel(std::int64_t t, std::int64_t id) { queue.erase({t, id}); }
    void run_until(std::int64_t t) {
      while (!queue.empty() && queue.begin()->first.first <= t) {
        auto node = queue.extract(queue.begin());
        now = node.key().first;
        node.mapped()();
      }
      now = std::max(now, t);
    }
  };
  for (int round = 0; round < 30; ++round) {
    // run(engine): the program, written once against either queue.
    auto program = [round](auto& q, auto now, auto schedule, auto cancel, auto run_until) {
      std::mt19937_64 rng(1000 + round);
      std::vector<std::int64_t> log;
      std::vector<std::pair<std::int64_t, decltype(schedule(0, nullptr))>> handles;
      std::function<void(int)> event = [&](int tag) {
        log.push_back(now() * 1000 + tag);
        for (int i = 0, n = static_cast<int>(rng() % 3); i < n; ++i) {
          const std::int64_t delay = rng() % 4 == 0 ? 0 : static_cast<std::int64_t>(rng() % 300);
          const int child = static_cast<int>(rng() % 1000);
          handles.emplace_back(now() + delay,
                               schedule(now() + delay, [&, child] { event(child); }));
        }
        if (!handles.empty() && rng() % 5 == 0) {
          const auto& [t, h] = handles[rng() % handles.size()];
          if (t > now()) cancel(t, h);
        }
      };
      for (int i = 0; i < 50; ++i) {
        const std::int64_t t = static_cast<std::int64_t>(rng() % 2000);
        handles.emplace_back(t, schedule(t, [&, i] { event(i); }));
      }
      for (std::int64_t t = 0; t < 6000;) {
        t += static_cast<std::int64_t>(rng() % 200);
        run_until(t);
        log.push_back(-now());
        // From outside an event: just after now, before whatever is pending next.
        const std::int64_t at = now() + static_cast<std::int64_t>(rng() % 3);
        const int tag = static_cast<int>(rng() % 1000);
        handles.emplace_back(at, schedule(at, [&, tag] { event(tag); }));
      }
      (void)q;
      return log;
    };
    Simulator sim;
    std::vector<EventId> ids;
    const auto got = program(
        sim, [&] { return sim.now().ns; },
        [&](std::int64_t t, std::function<void()> fn) {
          return sim.schedule_at(SimTime{t}, std::move(fn));
        },
        [&](std::int64_t, EventId id) { sim.cancel(id); },
        [&](std::int64_t t) { sim.run_until(SimTime{t}); });
    RefSim ref;
    const auto want = program(
        ref, [&] { return ref.now; },
        [&](std::int64_t t, std::function<void()> fn) { return ref.schedule_at(t, std::move(fn)); },
        [&](std::int64_t t, std::int64_t id) { ref.cancel(t, id); },
        [&](std::int64_t t) { ref.run_until(t); });
    ASSERT_GT(want.size(), 200u);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(EventQueue, InstantEndWorkRunsAfterEveryEventDueNowAndIsNoEvent) {
  Simulator sim;
  std::vector<std::string> log;
  sim.schedule_at(SimTime{10}, [&] {
    log.push_back("a");
    sim.at_instant_end([&] {
      log.push_back("end@" + std::to_string(sim.now().ns));
      sim.at_instant_end([&] { log.push_back("nested"); });
      sim.schedule_at(sim.now(), [&] { log.push_back("from-end"); });
    });
    sim.schedule_at(SimTime{10}, [&] { log.push_back("b"); });
  });
  sim.schedule_at(SimTime{10}, [&] { log.push_back("c"); });
  sim.schedule_at(SimTime{11}, [&] { log.push_back("d"); });
  sim.run();
  EXPECT_EQ(log, (std::vector<std::string>{"a", "c", "b", "end@10", "nested", "from-end", "d"}));
  EXPECT_EQ(sim.executed_count(), 5u);
  // run_until finishes the instant it stops in.
  sim.schedule_at(SimTime{20}, [&] { sim.at_instant_end([&] { log.push_back("end@20"); }); });
  sim.run_until(SimTime{20});
  EXPECT_EQ(log.back(), "end@20");
}

// Random programs whose events register instant-end work, against a reference that runs
// that work when the next event is later than now (or none is left by the bound).
TEST(EventQueue, InstantEndWorkMatchesAReference) {
  struct RefSim {
    std::int64_t now = 0, seq = 0;
    std::map<std::pair<std::int64_t, std::int64_t>, std::function<void()>> queue;
    std::vector<std::function<void()>> ending;
    void schedule_at(std::int64_t t, std::function<void()> fn) {
      queue.emplace(std::pair{t, seq++}, std::move(fn));
    }
    void end_instant() {
      while (!ending.empty()) {
        auto fns = std::move(ending);
        ending.clear();
        for (auto& f : fns) f();
      }
    }
    void run_until(std::int64_t t) {
      for (;;) {
        if (!ending.empty() && (queue.empty() || queue.begin()->first.first > now)) end_instant();
        if (queue.empty() || queue.begin()->first.first > t) break;
        auto node = queue.extract(queue.begin());
        now = node.key().first;
        node.mapped()();
      }
      now = std::max(now, t);
    }
  };
  for (int round = 0; round < 30; ++round) {
    auto program = [round](auto now, auto schedule, auto at_end, auto run_until) {
      std::mt19937_64 rng(77 + round);
      std::vector<std::int64_t> log;
      std::function<void(int, int)> event = [&](int tag, int depth) {
        log.push_back(now() * 1000 + tag);
        for (int i = 0, n = static_cast<int>(rng() % 3); i < n && depth < 6; ++i) {
          const std::int64_t delay = rng() % 3 == 0 ? 0 : static_cast<std::int64_t>(rng() % 50);
          const int child = static_cast<int>(rng() % 500);
          schedule(now() + delay, [&, child, depth] { event(child, depth + 1); });
        }
        if (rng() % 3 == 0) {
          const int tag2 = 500 + static_cast<int>(rng() % 500);
          at_end([&, tag2, depth] {
            log.push_back(-(now() * 1000 + tag2));
            if (rng() % 2 && depth < 6) schedule(now(), [&, depth] { event(999, depth + 1); });
          });
        }
      };
      for (int i = 0; i < 40; ++i) {
        const std::int64_t t = static_cast<std::int64_t>(rng() % 400);
        schedule(t, [&, i] { event(i, 0); });
      }
      for (std::int64_t t = 0; t < 1500; t += 1 + static_cast<std::int64_t>(rng() % 60)) {
        run_until(t);
      }
      return log;
    };
    Simulator sim;
    const auto got = program([&] { return sim.now().ns; },
                             [&](std::int64_t t, std::function<void()> fn) {
                               sim.schedule_at(SimTime{t}, std::move(fn));
                             },
                             [&](std::function<void()> fn) { sim.at_instant_end(std::move(fn)); },
                             [&](std::int64_t t) { sim.run_until(SimTime{t}); });
    RefSim ref;
    const auto want = program(
        [&] { return ref.now; },
        [&](std::int64_t t, std::function<void()> fn) { ref.schedule_at(t, std::move(fn)); },
        [&](std::function<void()> fn) { ref.ending.push_back(std::move(fn)); },
        [&](std::int64_t t) { ref.run_until(t); });
    ASSERT_GT(want.size(), 100u);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(SimTime, SecondsRoundToTheNearestNanosecond) {
  EXPECT_EQ(from_seconds(1.5e-9).ns, 2);
  EXPECT_EQ(from_seconds(1.4e-9).ns, 1);
  EXPECT_EQ(from_seconds(Seconds{16.001}).ns, 16'001'000'000);
  EXPECT_EQ(from_seconds(1e300), SimTime::max());
  EXPECT_DOUBLE_EQ(milliseconds(1500).seconds(), 1.5);
}

}  // namespace
}  // namespace kvshift::sim
