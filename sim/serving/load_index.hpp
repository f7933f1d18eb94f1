// LoadIndex: the open GPUs ordered by (reserved share, index), for the least-loaded
// router. An indexed binary heap: an update is an O(log n) sift in one contiguous
// array (no node allocations and pointer chasing, as a std::set of 10,000 GPUs has),
// and visiting GPUs in ascending order is a best-first walk from the heap's root
// that touches about as many entries as it visits — usually one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kvshift::sim {

class LoadIndex {
 public:
  /// Inserts `gpu` or moves it to `share`.
  void set(int gpu, double share) {
    const auto g = static_cast<std::size_t>(gpu);
    if (g >= pos_.size()) pos_.resize(g + 1, kOut);
    if (pos_[g] == kOut) {
      heap_.push_back({share, gpu});
      pos_[g] = heap_.size() - 1;
      sift_up(pos_[g]);
      return;
    }
    const double old = heap_[pos_[g]].share;
    heap_[pos_[g]].share = share;
    share < old ? sift_up(pos_[g]) : sift_down(pos_[g]);
  }

  /// Takes `gpu` out (nothing when it is not in).
  void erase(int gpu) {
    const auto g = static_cast<std::size_t>(gpu);
    if (g >= pos_.size() || pos_[g] == kOut) return;
    const std::size_t p = pos_[g];
    pos_[g] = kOut;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (p == heap_.size()) return;
    place(p, last);
    sift_up(p);
    sift_down(pos_[static_cast<std::size_t>(last.gpu)]);
  }

  std::size_t size() const { return heap_.size(); }

  /// Calls visit(gpu) in ascending (share, gpu) order until it returns true.
  template <class F>
  void visit_in_order(F&& visit) const {
    if (heap_.empty()) return;
    // A min-heap of heap positions: each position's entry is below its children's.
    const auto later = [this](std::size_t a, std::size_t b) { return less(heap_[b], heap_[a]); };
    frontier_.assign(1, 0);
    while (!frontier_.empty()) {
      std::pop_heap(frontier_.begin(), frontier_.end(), later);
      const std::size_t p = frontier_.back();
      frontier_.pop_back();
      if (visit(heap_[p].gpu)) return;
      for (const std::size_t c : {2 * p + 1, 2 * p + 2}) {
        if (c >= heap_.size()) continue;
        frontier_.push_back(c);
        std::push_heap(frontier_.begin(), frontier_.end(), later);
      }
    }
  }

 private:
  struct Entry {
    double share;
    int gpu;
  };
  static constexpr std::size_t kOut = ~std::size_t{0};

  static bool less(const Entry& a, const Entry& b) {
    return a.share < b.share || (a.share == b.share && a.gpu < b.gpu);
  }
  void place(std::size_t p, const Entry& e) {
    heap_[p] = e;
    pos_[static_cast<std::size_t>(e.gpu)] = p;
  }
  void sift_up(std::size_t p) {
    const Entry e = heap_[p];
    for (; p > 0 && less(e, heap_[(p - 1) / 2]); p = (p - 1) / 2) place(p, heap_[(p - 1) / 2]);
    place(p, e);
  }
  void sift_down(std::size_t p) {
    const Entry e = heap_[p];
    for (std::size_t c = 2 * p + 1; c < heap_.size(); c = 2 * p + 1) {
      if (c + 1 < heap_.size() && less(heap_[c + 1], heap_[c])) ++c;
      if (!less(heap_[c], e)) break;
      place(p, heap_[c]);
      p = c;
    }
    place(p, e);
  }

  std::vector<Entry> heap_;
  std::vector<std::size_t> pos_;               ///< gpu -> heap position, kOut when out
  mutable std::vector<std::size_t> frontier_;  ///< visit_in_order's scratch
};

}  // namespace kvshift::sim
