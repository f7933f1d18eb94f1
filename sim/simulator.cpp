// The event engine's non-template half: slot pool, 4-ary heap, run loops.
#include "sim/simulator.hpp"

#include <string>

namespace kvshift::sim {
namespace {

constexpr bool earlier(std::int64_t ta, std::uint64_t sa, std::int64_t tb, std::uint64_t sb) {
  return ta < tb || (ta == tb && sa < sb);
}

}  // namespace

Simulator::Simulator() { heap_.reserve(1024); }

Simulator::~Simulator() {
  for (std::uint32_t i = 0; i < slot_count_; ++i) {
    Slot& s = slot(i);
    if (s.state == State::kPending && s.destroy) s.destroy(s.storage);
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
  if ((slot_count_ & (kBlockSize - 1)) == 0) blocks_.push_back(std::make_unique<Slot[]>(kBlockSize));
  return slot_count_++;
}

void Simulator::release_slot(std::uint32_t i) {
  Slot& s = slot(i);
  s.state = State::kFree;
  if (++s.generation == 0) s.generation = 1;  // 0 is reserved for "no event"
  free_.push_back(i);
}

void Simulator::push_key(Key k) {
  std::size_t pos = heap_.size();
  heap_.push_back(k);
  while (pos > 0) {
    const std::size_t parent = (pos - 1) / 4;
    const Key& p = heap_[parent];
    if (!earlier(k.time, k.seq, p.time, p.seq)) break;
    heap_[pos] = p;
    pos = parent;
  }
  heap_[pos] = k;
}

Simulator::Key Simulator::pop_key() {
  const Key top = heap_.front();
  const Key last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return top;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t first = 4 * pos + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t end = first + 4 < n ? first + 4 : n;
    for (std::size_t c = first + 1; c < end; ++c) {
      if (earlier(heap_[c].time, heap_[c].seq, heap_[best].time, heap_[best].seq)) best = c;
    }
    if (!earlier(heap_[best].time, heap_[best].seq, last.time, last.seq)) break;
    heap_[pos] = heap_[best];
    pos = best;
  }
  heap_[pos] = last;
  return top;
}

bool Simulator::cancel(EventId id) {
  if (!id.valid() || id.slot >= slot_count_) return false;
  Slot& s = slot(id.slot);
  if (s.generation != id.generation || s.state != State::kPending) return false;
  if (s.destroy) s.destroy(s.storage);
  s.state = State::kCancelled;
  --live_;
  return true;
}

bool Simulator::is_pending(EventId id) const {
  if (!id.valid() || id.slot >= slot_count_) return false;
  const Slot& s = slot(id.slot);
  return s.generation == id.generation && s.state == State::kPending;
}

void Simulator::skip_tombstones() {
  while (!heap_.empty() && slot(heap_.front().slot).state == State::kCancelled) {
    release_slot(pop_key().slot);
  }
}

SimTime Simulator::next_time() {
  skip_tombstones();
  return heap_.empty() ? SimTime::max() : SimTime{heap_.front().time};
}

bool Simulator::step() {
  skip_tombstones();
  if (heap_.empty()) return false;
  const Key k = pop_key();
  if (k.time < now_.ns) throw std::logic_error("Simulator: time went backwards");
  now_ = SimTime{k.time};
  Slot& s = slot(k.slot);
  s.state = State::kRunning;
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
  s.invoke(s.storage);
  return true;
}

void Simulator::run() {
  stop_requested_ = false;
  while (!stop_requested_ && step()) {
  }
}

void Simulator::run_until(SimTime t) {
  stop_requested_ = false;
  while (!stop_requested_ && next_time() <= t) step();
  if (!stop_requested_ && t > now_) now_ = t;
}

}  // namespace kvshift::sim
