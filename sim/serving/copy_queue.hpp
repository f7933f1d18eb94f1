// CopyQueue: one channel that copies serve in turn — one direction of a GPU's
// host link (PCIe or C2C: host DRAM to HBM, or back), or a node's SSD reads.
// Copies run one at a time at the channel's full rate, in the order they were
// asked for; a copy that may not start yet (its data is still being read) holds
// its place. Alone, a copy takes exactly its duration, so the closed forms of
// an idle channel are unchanged; under a burst the later copies wait.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/time.hpp"

namespace kvshift::sim {

class CopyQueue {
 public:
  /// A copy of `length` asked for at `now` that may start at `ready` (≥ now): when it ends.
  SimTime copy(SimTime now, SimTime ready, SimTime length) {
    const SimTime start = std::max({now, ready, free_});
    waited_ns_ += (start - std::max(now, ready)).ns;
    free_ = start + length;
    busy_ns_ += length.ns;
    return free_;
  }
  /// How long a copy asked for at `now` would wait for those ahead of it.
  SimTime backlog(SimTime now) const { return free_ > now ? free_ - now : SimTime{}; }
  /// The channel's end failed: copies not yet done are gone.
  void clear(SimTime now) { free_ = std::min(free_, now); }

  std::int64_t busy_ns() const { return busy_ns_; }      ///< copy time asked for, in all
  std::int64_t waited_ns() const { return waited_ns_; }  ///< time copies waited for others

 private:
  SimTime free_{};
  std::int64_t busy_ns_ = 0, waited_ns_ = 0;
};

}  // namespace kvshift::sim
