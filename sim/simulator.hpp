// Simulator: the discrete-event engine. One object owns the clock and the
// event queue; nothing is global, so tests and sweeps may run several
// simulations in one process.
//
// Events are ordered by (time, sequence number): events at equal times run in
// the order they were scheduled, so a scenario and a seed give one event
// sequence on every machine. Time never goes backwards: scheduling before
// now() is a programming error (std::logic_error).
//
// Data layout and complexity (n = events in the queue, tombstones included):
//   schedule_at / schedule_after  O(1)      append to one bucket of a radix heap
//   cancel                        O(1)      tombstone: the slot is marked and its
//                                            callable destroyed; its key is dropped
//                                            when it reaches the front
//   step (pop)                    amortised O(log2 of the time span of the queue):
//                                            a key moves to a lower bucket at most
//                                            once per bit of its distance to now
// The queue is a radix heap keyed by time: bucket b holds keys whose highest bit
// differing from the last popped time is bit b-1, so it needs time to be
// monotone, which a simulator guarantees. Buckets are append-only vectors and
// are redistributed in order, so keys of equal time leave in the order they
// were scheduled with no sequence number to compare.
// Work that batches what one instant changed (the network's re-sharing) runs at
// the end of the instant instead of as an event: at_instant_end(fn) runs fn once
// every event due now has run, those it scheduled for now included, before the
// clock moves on. It is not an event (executed_count() does not count it).
// Callables live in pooled slots (stable addresses, recycled through a free
// list) with 48 bytes of inline storage, so the hot path allocates nothing once
// the buffers are warm and calls through one plain function pointer: no
// std::function and no virtual call per event. Larger callables still work;
// they are boxed on the heap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/time.hpp"

namespace kvshift::sim {

/// Handle of a scheduled event; stale handles are harmless (cancel returns false).
struct EventId {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;  ///< 0 never names a live event
  constexpr bool valid() const { return generation != 0; }
  constexpr bool operator==(const EventId&) const = default;
};

class Simulator {
 public:
  Simulator();
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  /// Current simulated time.
  SimTime now() const { return now_; }

  /// Runs `fn()` at time `t` (>= now()); returns a handle for cancel().
  template <class F>
  EventId schedule_at(SimTime t, F&& fn);
  /// Runs `fn()` after `delay` (>= 0) from now().
  template <class F>
  EventId schedule_after(SimTime delay, F&& fn) {
    return schedule_at(now_ + delay, std::forward<F>(fn));
  }
  /// Runs `fn()` at the end of this instant: after every event due now (and those they
  /// schedule for now), before any later one; in registration order. run() and
  /// run_until() run them; a lone step() leaves them for the next step.
  void at_instant_end(std::function<void()> fn) { instant_end_.push_back(std::move(fn)); }
  /// Cancels a pending event in O(1). False if it already ran, was cancelled or is running.
  bool cancel(EventId id);
  /// True while the event is scheduled and neither run nor cancelled.
  bool is_pending(EventId id) const;

  /// Runs the next live event; false when none is left.
  bool step();
  /// Runs events until none is left or stop() is called.
  void run();
  /// Runs every event with time <= `t`, then advances the clock to `t` (if later).
  void run_until(SimTime t);
  /// Makes the current run()/run_until() return after the running event.
  void stop() { stop_requested_ = true; }

  /// Live (not cancelled) events in the queue.
  std::size_t pending_count() const { return live_; }
  /// Events run so far.
  std::uint64_t executed_count() const { return executed_; }
  /// Time of the next live event, or SimTime::max() when none is left. O(1) while
  /// events are due at the front time, else a scan of one bucket.
  SimTime next_time();

 private:
  static constexpr std::size_t kInline = 48;
  static constexpr std::uint32_t kBlockBits = 12;
  static constexpr std::uint32_t kBlockSize = 1u << kBlockBits;

  /// kPendingOwning: pending, and its callable needs its destructor run.
  enum class State : std::uint8_t { kFree, kPending, kPendingOwning, kCancelled, kRunning };
  static bool pending(State s) { return s == State::kPending || s == State::kPendingOwning; }

  /// One cache line: the callable and how to run and destroy it. The slot's
  /// state and generation live in compact side arrays that the queue scans.
  struct alignas(64) Slot {
    alignas(std::max_align_t) unsigned char storage[kInline];
    void (*invoke)(void*) = nullptr;
    void (*destroy)(void*) = nullptr;
  };

  struct Key {
    std::uint64_t time;
    std::uint32_t slot;
  };

  template <class Fn>
  struct Boxed {
    std::unique_ptr<Fn> fn;
    void operator()() { (*fn)(); }
  };

  Slot& slot(std::uint32_t i) { return blocks_[i >> kBlockBits][i & (kBlockSize - 1)]; }
  const Slot& slot(std::uint32_t i) const { return blocks_[i >> kBlockBits][i & (kBlockSize - 1)]; }
  std::uint32_t acquire_slot();
  void release_slot(std::uint32_t i);
  static int bucket_of(std::uint64_t time, std::uint64_t last) {
    return time == last ? 0 : 64 - __builtin_clzll(time ^ last);
  }
  void push_key(Key k) { buckets_[bucket_of(k.time, last_)].push_back(k); }
  /// Moves the earliest keys into bucket 0 if they are due by `until`; false when the
  /// queue is empty or its earliest key is later.
  bool refill(std::uint64_t until);
  /// Drops cancelled keys from the front; false when no live event is due by `until`.
  bool front_ready(std::uint64_t until);
  /// Runs the next live event if it is due by `until` (ns); false when none is. First runs
  /// the instant-end work if no event is due now.
  bool step_until(std::uint64_t until);
  /// Whether a live event is due at now() (drops cancelled keys from the front).
  bool due_now();
  /// Runs the instant-end work, including what it registers itself.
  void end_instant();
  /// Prefetches what the events after the running one will touch first, when the queue
  /// knows them without a search: the rest of bucket 0, or a lowest bucket of few keys.
  /// A large run's events each start with a cache miss on their own object; fetched
  /// while the running event works, that miss is mostly hidden.
  void prefetch_next() const;
  void check_time(SimTime t) const;

  template <class Fn>
  static void invoke_fn(void* p) {
    (*static_cast<Fn*>(p))();
  }
  template <class Fn>
  static void destroy_fn(void* p) {
    static_cast<Fn*>(p)->~Fn();
  }

  SimTime now_{};
  std::uint64_t executed_ = 0;
  std::size_t live_ = 0;
  bool stop_requested_ = false;
  std::array<std::vector<Key>, 65> buckets_;
  std::vector<std::function<void()>> instant_end_, ending_;
  std::size_t head_ = 0;    ///< next key of bucket 0
  std::uint64_t last_ = 0;  ///< time of bucket 0's keys
  std::vector<std::unique_ptr<Slot[]>> blocks_;
  std::uint32_t slot_count_ = 0;
  std::vector<std::uint32_t> free_;
  std::vector<State> state_;               ///< per slot
  std::vector<std::uint32_t> generation_;  ///< per slot; never 0
  std::vector<const void*> hint_;          ///< per slot: what its callable will touch first
};

template <class F>
EventId Simulator::schedule_at(SimTime t, F&& fn) {
  using Fn = std::decay_t<F>;
  check_time(t);
  const std::uint32_t i = acquire_slot();
  Slot& s = slot(i);
  if constexpr (sizeof(Fn) <= kInline && alignof(Fn) <= alignof(std::max_align_t)) {
    ::new (static_cast<void*>(s.storage)) Fn(std::forward<F>(fn));
    s.invoke = &invoke_fn<Fn>;
    s.destroy = std::is_trivially_destructible_v<Fn> ? nullptr : &destroy_fn<Fn>;
  } else {
    using Box = Boxed<Fn>;
    ::new (static_cast<void*>(s.storage)) Box{std::make_unique<Fn>(std::forward<F>(fn))};
    s.invoke = &invoke_fn<Box>;
    s.destroy = &destroy_fn<Box>;
  }
  state_[i] = s.destroy ? State::kPendingOwning : State::kPending;
  // Most callables capture the object they work on first ([this, ...]): its address is
  // the line to fetch ahead of the event (prefetch_next). Anything else is a harmless hint.
  hint_[i] = nullptr;
  if constexpr (sizeof(Fn) >= sizeof(void*)) std::memcpy(&hint_[i], s.storage, sizeof(void*));
  ++live_;
  push_key({static_cast<std::uint64_t>(t.ns), i});
  return {i, generation_[i]};
}

}  // namespace kvshift::sim
