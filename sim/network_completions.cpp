// Completions of the sharing flows: one binary min-heap of the flows' due times
// (ns, ties by transfer id, so simultaneous completions end in id order) and
// one pending simulator event for the whole network, as a busy component
// keeps one event of its own. A rate change moves a flow in the heap
// (O(log n)) instead of cancelling and re-scheduling a simulator event, so the
// event queue holds no tombstone per rate change: memory stays with the
// running flows. The event may fire before the first due time (the first flow
// slowed down or left since it was armed); it then only re-arms itself. It is
// cancelled when no flow is sharing, so a run ends when its last transfer does.
#include <cmath>

#include "sim/network.hpp"

namespace kvshift::sim {

void Network::schedule_completion(Flow& f) {
  Hot& h = hot_[f.slot];
  const double rate = rates_[f.slot];
  if (!(rate > 0)) {  // no capacity now (cannot happen with positive bandwidths)
    heap_remove(f.slot);
    return;
  }
  const double ns = h.remaining_bits > 0 ? h.remaining_bits / rate * 1e9 : 0.0;
  const SimTime delay = ns < 9e18 ? SimTime{std::llround(ns)} : SimTime::max() - sim_.now();
  h.due = (sim_.now() + delay).ns;
  heap_update(f.slot);
}

bool Network::due_before(std::uint32_t a, std::uint32_t b) const {
  const Hot &x = hot_[a], &y = hot_[b];
  return x.due < y.due || (x.due == y.due && x.id < y.id);
}

void Network::sift_up(std::size_t i) {
  const std::uint32_t slot = due_heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!due_before(slot, due_heap_[parent])) break;
    due_heap_[i] = due_heap_[parent];
    hot_[due_heap_[i]].heap_pos = static_cast<std::uint32_t>(i);
    i = parent;
  }
  due_heap_[i] = slot;
  hot_[slot].heap_pos = static_cast<std::uint32_t>(i);
}

void Network::sift_down(std::size_t i) {
  const std::uint32_t slot = due_heap_[i];
  const std::size_t n = due_heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && due_before(due_heap_[child + 1], due_heap_[child])) ++child;
    if (!due_before(due_heap_[child], slot)) break;
    due_heap_[i] = due_heap_[child];
    hot_[due_heap_[i]].heap_pos = static_cast<std::uint32_t>(i);
    i = child;
  }
  due_heap_[i] = slot;
  hot_[slot].heap_pos = static_cast<std::uint32_t>(i);
}

void Network::heap_update(std::uint32_t slot) {
  Hot& h = hot_[slot];
  if (h.heap_pos == kNoSlot) {
    due_heap_.push_back(slot);
    sift_up(due_heap_.size() - 1);
    return;
  }
  sift_up(h.heap_pos);
  sift_down(hot_[slot].heap_pos);
}

void Network::heap_remove(std::uint32_t slot) {
  Hot& h = hot_[slot];
  if (h.heap_pos == kNoSlot) return;
  const std::size_t i = h.heap_pos;
  h.heap_pos = kNoSlot;
  const std::uint32_t last = due_heap_.back();
  due_heap_.pop_back();
  if (last != slot) {
    due_heap_[i] = last;
    sift_up(i);
    sift_down(hot_[last].heap_pos);
  }
  if (due_heap_.empty()) {
    sim_.cancel(tick_);
    tick_ = {};
  }
}

void Network::arm_tick() {
  if (due_heap_.empty()) return;
  const std::int64_t first = hot_[due_heap_.front()].due;
  // An event armed no later than the first due stays: it re-arms when it fires early.
  if (tick_.valid() && tick_at_ <= first) return;
  sim_.cancel(tick_);
  tick_at_ = first;
  tick_ = sim_.schedule_at(SimTime{first}, [this] { tick(); });
}

void Network::tick() {
  tick_ = {};
  const std::int64_t now = sim_.now().ns;
  // A callback may submit, cancel or re-route transfers: the heap is re-read every time.
  while (!due_heap_.empty() && hot_[due_heap_.front()].due <= now) {
    const std::uint32_t slot = due_heap_.front();
    heap_remove(slot);
    complete(hot_[slot].flow);
  }
  arm_tick();
}

}  // namespace kvshift::sim
