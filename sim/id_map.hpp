// IdMap: a map from 32-bit ids to 32-bit values in one flat array (open
// addressing, linear probing, backward-shift deletion, load at most 1/2). The
// network keeps one entry per transfer in flight and ends millions of them in
// a fleet run: a node-based map allocates and frees a node for each, this one
// allocates only when the number in flight reaches a new high. Leaves out:
// iteration, other key or value types.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kvshift::sim {

class IdMap {
 public:
  /// Adds `id` -> `value`; `id` must not be present and must not be kEmpty.
  void insert(std::uint32_t id, std::uint32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = home(id);
    while (slots_[i].id != kEmpty) i = (i + 1) & mask_;
    slots_[i] = {id, value};
    ++size_;
  }

  std::optional<std::uint32_t> find(std::uint32_t id) const {
    if (slots_.empty() || id == kEmpty) return std::nullopt;
    for (std::size_t i = home(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return slots_[i].value;
      if (slots_[i].id == kEmpty) return std::nullopt;
    }
  }

  /// Removes `id`; false when it is not present.
  bool erase(std::uint32_t id) {
    if (slots_.empty() || id == kEmpty) return false;
    std::size_t i = home(id);
    while (slots_[i].id != id) {
      if (slots_[i].id == kEmpty) return false;
      i = (i + 1) & mask_;
    }
    // Backward shift: later entries of the probe run move up into the hole unless that
    // would put them before their home slot, so no tombstones are ever needed.
    for (std::size_t j = (i + 1) & mask_; slots_[j].id != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].id);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].id = kEmpty;
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }

  static constexpr std::uint32_t kEmpty = ~std::uint32_t{0};

 private:
  struct Slot {
    std::uint32_t id = kEmpty;
    std::uint32_t value = 0;
  };

  // Fibonacci hashing: sequential ids spread over the table.
  std::size_t home(std::uint32_t id) const {
    return static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ULL) >> shift_) & mask_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const std::size_t capacity = old.empty() ? 16 : 2 * old.size();
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.id != kEmpty) insert(s.id, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace kvshift::sim
