// The event engine's non-template half: slot pool, radix heap, run loops, look-ahead.
#include "sim/simulator.hpp"

#include <string>

namespace kvshift::sim {
Simulator::Simulator() = default;

Simulator::~Simulator() {
  for (std::uint32_t i = 0; i < slot_count_; ++i) {
    Slot& s = slot(i);
    if (state_[i] == State::kPendingOwning) s.destroy(s.storage);
  }
}

void Simulator::check_time(SimTime t) const {
  if (t < now_) {
    throw std::logic_error("Simulator: event scheduled at " + std::to_string(t.ns) +
                           " ns, before now (" + std::to_string(now_.ns) + " ns)");
  }
}

std::uint32_t Simulator::acquire_slot() {
  if (!free_.empty()) {
    const std::uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  if ((slot_count_ & (kBlockSize - 1)) == 0)
    blocks_.push_back(std::make_unique<Slot[]>(kBlockSize));
  state_.push_back(State::kFree);
  generation_.push_back(1);
  hint_.push_back(nullptr);
  return slot_count_++;
}

void Simulator::release_slot(std::uint32_t i) {
  state_[i] = State::kFree;
  if (++generation_[i] == 0) generation_[i] = 1;  // 0 is reserved for "no event"
  free_.push_back(i);
}

bool Simulator::refill(std::uint64_t until) {
  int b = 1;
  while (b < 65 && buckets_[b].empty()) ++b;
  if (b == 65) return false;
  std::vector<Key>& from = buckets_[b];
  std::uint64_t lowest = from.front().time;
  for (const Key& k : from) lowest = k.time < lowest ? k.time : lowest;
  // Past `until` the queue stays as it is: the clock may stop short of `lowest`, and
  // events scheduled in between must still sort below it.
  if (lowest > until) return false;
  buckets_[0].clear();
  head_ = 0;
  last_ = lowest;
  for (const Key& k : from)
    buckets_[bucket_of(k.time, last_)].push_back(k);  // all below b, in order
  from.clear();
  return true;
}

bool Simulator::front_ready(std::uint64_t until) {
  for (;;) {
    std::vector<Key>& front = buckets_[0];
    while (head_ < front.size()) {
      const std::uint32_t i = front[head_].slot;
      if (state_[i] != State::kCancelled) return last_ <= until;
      release_slot(i);
      ++head_;
    }
    if (!refill(until)) return false;
  }
}

bool Simulator::cancel(EventId id) {
  if (!id.valid() || id.slot >= slot_count_) return false;
  if (generation_[id.slot] != id.generation || !pending(state_[id.slot])) return false;
  if (state_[id.slot] == State::kPendingOwning) {
    Slot& s = slot(id.slot);
    s.destroy(s.storage);
  }
  state_[id.slot] = State::kCancelled;
  --live_;
  return true;
}

bool Simulator::is_pending(EventId id) const {
  if (!id.valid() || id.slot >= slot_count_) return false;
  return generation_[id.slot] == id.generation && pending(state_[id.slot]);
}

SimTime Simulator::next_time() {
  // Peeks without refilling: a refill would move last_ past now(), and events may
  // still be scheduled in between (run_until advances the clock without popping).
  std::vector<Key>& front = buckets_[0];
  while (head_ < front.size() && state_[front[head_].slot] == State::kCancelled) {
    release_slot(front[head_++].slot);
  }
  if (head_ < front.size()) return SimTime{static_cast<std::int64_t>(last_)};
  for (int b = 1; b < 65; ++b) {
    bool found = false;
    std::uint64_t lowest = ~std::uint64_t{0};
    for (const Key& k : buckets_[b]) {
      if (state_[k.slot] == State::kCancelled) continue;
      found = true;
      lowest = k.time < lowest ? k.time : lowest;
    }
    if (found) return SimTime{static_cast<std::int64_t>(lowest)};
  }
  return SimTime::max();
}

bool Simulator::step() { return step_until(~std::uint64_t{0}); }

bool Simulator::due_now() {
  std::vector<Key>& front = buckets_[0];
  while (head_ < front.size() && state_[front[head_].slot] == State::kCancelled) {
    release_slot(front[head_++].slot);
  }
  // Bucket 0 holds the keys of time last_; after run_until moved the clock past it,
  // events due now sit in a higher bucket (only work registered outside an event sees that).
  return head_ < front.size() && last_ == static_cast<std::uint64_t>(now_.ns);
}

void Simulator::end_instant() {
  while (!instant_end_.empty()) {
    ending_.swap(instant_end_);
    for (auto& fn : ending_) fn();
    ending_.clear();
  }
}

bool Simulator::step_until(std::uint64_t until) {
  if (!instant_end_.empty() && !due_now()) end_instant();
  if (!front_ready(until)) return false;
  const Key k = buckets_[0][head_++];
  const SimTime t{static_cast<std::int64_t>(k.time)};
  if (t < now_) throw std::logic_error("Simulator: time went backwards");
  now_ = t;
  Slot& s = slot(k.slot);
  state_[k.slot] = State::kRunning;
  --live_;
  ++executed_;
  // Releases the slot even if the callable throws (slots have stable addresses).
  struct Release {
    Simulator* sim;
    std::uint32_t index;
    ~Release() {
      Slot& done = sim->slot(index);
      if (done.destroy) done.destroy(done.storage);
      sim->release_slot(index);
    }
  } release{this, k.slot};
  prefetch_next();
  s.invoke(s.storage);
  return true;
}

void Simulator::prefetch_next() const {
  constexpr std::size_t kAhead = 2;
  const std::vector<Key>* next = &buckets_[0];
  std::size_t from = head_;
  if (from >= next->size()) {
    int b = 1;
    while (b < 65 && buckets_[b].empty()) ++b;
    if (b == 65 || buckets_[b].size() > kAhead) return;  // the next one is not known yet
    next = &buckets_[b];
    from = 0;
  }
  for (std::size_t i = from; i < next->size() && i < from + kAhead; ++i)
    __builtin_prefetch(hint_[(*next)[i].slot]);
}

void Simulator::run() {
  stop_requested_ = false;
  while (!stop_requested_ && (step() || !instant_end_.empty())) {
  }
}

void Simulator::run_until(SimTime t) {
  stop_requested_ = false;
  const auto until = static_cast<std::uint64_t>(t.ns);
  while (!stop_requested_ && (step_until(until) || !instant_end_.empty())) {
  }
  if (!stop_requested_ && t > now_) now_ = t;
}

}  // namespace kvshift::sim
