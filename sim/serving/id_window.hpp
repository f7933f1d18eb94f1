// IdWindow: items numbered by consecutive ids, kept from the oldest one still
// wanted on. Lookup by id is an index; the oldest are retired from the front.
// Items stay in place (a deque), so references to them survive later adds.
#pragma once

#include <cstdint>
#include <deque>

namespace kvshift::sim {

template <class T>
class IdWindow {
 public:
  /// The id the next add() takes.
  std::uint64_t next_id() const { return first_ + items_.size(); }
  T& add() { return items_.emplace_back(); }
  /// The item `id`, or nullptr once it was retired (or before it was added).
  T* find(std::uint64_t id) {
    if (id < first_ || id - first_ >= items_.size()) return nullptr;
    return &items_[id - first_];
  }
  /// The item `id`, which is in the window.
  T& at(std::uint64_t id) { return items_[id - first_]; }
  /// Retires items from the front while `done(item)`, handing each to `retire` first.
  template <class Done, class Retire>
  void retire_while(Done done, Retire retire) {
    while (!items_.empty() && done(items_.front())) {
      retire(items_.front());
      items_.pop_front();
      ++first_;
    }
  }
  void clear() {
    first_ += items_.size();
    items_.clear();
  }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }

 private:
  std::deque<T> items_;
  std::uint64_t first_ = 0;  ///< id of items_.front()
};

}  // namespace kvshift::sim
