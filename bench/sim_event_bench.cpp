// Event engine throughput: 10 million scheduled events, 30 % of them cancelled
// before they fire, for kvshift's Simulator and for a plain
// std::priority_queue<std::function> engine with tombstone cancels.
//
// Workload (a "hold" model, as a network simulator produces): 10,000 actors
// each keep exactly one pending event. When an actor's event fires it schedules
// its next one 1..1000 ns ahead, and with probability 3/7 it also reschedules a
// random other actor (cancel its pending event, schedule a new one), as a flow
// whose rate changed does. So 30 % of all scheduled events are cancelled.
// events_per_s counts scheduled events (fired + cancelled) per second.
// Target: >= 20 M events/s and >= 3x the naive engine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "sim/simulator.hpp"

namespace {

using kvshift::sim::SimTime;

constexpr std::int64_t kTotalEvents = 10'000'000;
constexpr std::uint32_t kActors = 10'000;

/// The baseline: what one writes first.
class NaiveEngine {
 public:
  using Id = std::uint64_t;
  Id schedule_after(std::int64_t delay, std::function<void()> fn) {
    const Id id = live_.size();
    live_.push_back(1);
    queue_.push(Event{now_ + delay, id, std::move(fn)});
    return id;
  }
  bool cancel(Id id) {
    if (!live_[id]) return false;
    live_[id] = 0;
    return true;
  }
  void run() {
    while (!queue_.empty()) {
      Event e = std::move(const_cast<Event&>(queue_.top()));
      queue_.pop();
      if (!live_[e.id]) continue;
      live_[e.id] = 0;
      now_ = e.time;
      e.fn();
    }
  }

 private:
  struct Event {
    std::int64_t time;
    Id id;  // also the scheduling order
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time > b.time || (a.time == b.time && a.id > b.id);
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<char> live_;
  std::int64_t now_ = 0;
};

/// kvshift's engine behind the same two verbs.
struct KvshiftEngine {
  using Id = kvshift::sim::EventId;
  kvshift::sim::Simulator sim;
  template <class F>
  Id schedule_after(std::int64_t delay, F&& fn) {
    return sim.schedule_after(SimTime{delay}, std::forward<F>(fn));
  }
  bool cancel(Id id) { return sim.cancel(id); }
  void run() { sim.run(); }
};

template <class Engine>
struct Hold {
  Engine engine;
  std::vector<typename Engine::Id> pending = std::vector<typename Engine::Id>(kActors);
  std::uint64_t rng = 0x9E3779B97F4A7C15ull;
  std::int64_t scheduled = 0;
  std::int64_t cancelled = 0;

  std::uint64_t next() {  // xorshift64*
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
  }
  void schedule(std::uint32_t k) {
    const auto delay = static_cast<std::int64_t>(1 + next() % 1000);
    pending[k] = engine.schedule_after(delay, [this, k] { fire(k); });
    ++scheduled;
  }
  void fire(std::uint32_t k) {
    if (scheduled < kTotalEvents) schedule(k);
    if (scheduled < kTotalEvents && next() % 7 < 3) {
      const auto j = static_cast<std::uint32_t>(next() % kActors);
      if (engine.cancel(pending[j])) {
        ++cancelled;
        schedule(j);
      }
    }
  }
  void run() {
    for (std::uint32_t k = 0; k < kActors; ++k) schedule(k);
    engine.run();
  }
};

template <class Engine>
void BM_Hold(benchmark::State& state) {
  double cancelled_share = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = std::make_unique<Hold<Engine>>();
    state.ResumeTiming();
    h->run();
    benchmark::DoNotOptimize(h->scheduled);
    cancelled_share = static_cast<double>(h->cancelled) / static_cast<double>(h->scheduled);
    state.PauseTiming();
    h.reset();
    state.ResumeTiming();
  }
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(kTotalEvents) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["cancelled_share"] = cancelled_share;
}

BENCHMARK(BM_Hold<KvshiftEngine>)
    ->Name("Events/kvshift")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_Hold<NaiveEngine>)
    ->Name("Events/naive_priority_queue")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
