// LinkSampler: every `interval` until the end of the run, each link direction's
// mean utilisation over the interval just ended (bytes it carried over what its
// capacity now could carry; a link degraded during the interval reads against
// its new capacity; capped at 1). Idle directions are left out, so memory and
// links.csv grow with traffic, not with links.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/serving/fabric.hpp"
#include "sim/serving/results.hpp"
#include "sim/simulator.hpp"

namespace kvshift::sim {

class LinkSampler {
 public:
  LinkSampler(Simulator& sim, Fabric& fabric, Seconds interval, std::int64_t end_ns,
              std::vector<LinkSample>& out)
      : sim_(sim), fabric_(fabric), interval_(interval), end_ns_(end_ns), out_(out) {}

  /// Counts from now; the first sample is one interval later (none when interval is 0).
  void start() {
    for (const LinkCounter& c : fabric_.link_counters()) last_bytes_.push_back(c.bytes);
    if (interval_.value > 0) sim_.schedule_after(from_seconds(interval_), [this] { sample(); });
  }

 private:
  void sample() {
    const std::vector<LinkCounter>& now = fabric_.link_counters();
    for (std::size_t i = 0; i < now.size() && i < last_bytes_.size(); ++i) {
      const std::int64_t bytes = now[i].bytes - last_bytes_[i];
      last_bytes_[i] = now[i].bytes;
      const double capacity_bits = now[i].capacity_bps * interval_.value;
      const double util =
          capacity_bits > 0 ? std::min(1.0, 8.0 * static_cast<double>(bytes) / capacity_bits) : 0.0;
      if (bytes == 0) continue;
      out_.push_back({sim_.now().ns, now[i].name, util, bytes, now[i].capacity_bps});
    }
    const SimTime interval = from_seconds(interval_);
    if (sim_.now().ns + interval.ns <= end_ns_) {
      sim_.schedule_after(interval, [this] { sample(); });
    }
  }

  Simulator& sim_;
  Fabric& fabric_;
  Seconds interval_;
  std::int64_t end_ns_;
  std::vector<LinkSample>& out_;
  std::vector<std::int64_t> last_bytes_;  ///< per link direction, at the last sample
};

}  // namespace kvshift::sim
