// PathFaults: the path faults in force (a src -> dst path failed or stalled)
// and the sends a stall holds until the path is repaired.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/spec.hpp"

namespace kvshift::sim {

class PathFaults {
 public:
  /// `kind` is EventKind::kPathFailure or kPathStall.
  void set(int src, int dst, EventKind kind) { faults_[{src, dst}] = kind; }
  /// The fault on src -> dst now, if any.
  std::optional<EventKind> at(int src, int dst) const {
    if (faults_.empty()) return std::nullopt;
    const auto it = faults_.find({src, dst});
    if (it == faults_.end()) return std::nullopt;
    return it->second;
  }
  /// Holds `resume` until src -> dst is repaired.
  void when_clears(int src, int dst, std::function<void()> resume) {
    held_[{src, dst}].push_back(std::move(resume));
  }
  /// src -> dst is repaired: returns the sends it held, in the order they came (each checks
  /// that it is still wanted).
  std::vector<std::function<void()>> clear(int src, int dst) {
    faults_.erase({src, dst});
    const auto it = held_.find({src, dst});
    if (it == held_.end()) return {};
    std::vector<std::function<void()>> resume = std::move(it->second);
    held_.erase(it);
    return resume;
  }

 private:
  std::map<std::pair<int, int>, EventKind> faults_;
  std::map<std::pair<int, int>, std::vector<std::function<void()>>> held_;
};

}  // namespace kvshift::sim
