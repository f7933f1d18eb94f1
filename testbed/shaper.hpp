// User-space link shaping. One LinkShaper per link direction is a token bucket
// whose tokens are time on the wire: a frame of n bytes occupies 8n/B seconds,
// booked after the frames already booked (work conserving). Each flow keeps at
// most one frame booked at a time and books its next one when the previous has
// left, so the flows crossing a link take turns frame by frame: they share it
// fairly, and a flow held back elsewhere leaves its share to the others (the
// max-min sharing of sim/'s flow model, at frame granularity). A ShapedPath
// books every link of a route at once (cut-through: the bottleneck sets the
// pace) and adds the route's one-way latency before the frame reaches the
// socket. Clock: std::chrono::steady_clock. Leaves out: queueing loss, TCP's
// own congestion control (loopback never limits below the shaped rate when the
// rate stays under the measured loopback ceiling).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cost_model/units.hpp"

namespace kvshift::testbed {

using Clock = std::chrono::steady_clock;

/// Token-bucket depth of every link and flow: how far a sender woken late may catch up.
/// Deeper than the worst scheduling delay of a busy 2-core machine, so a late wake-up loses
/// no tokens; a new flow starts with an empty bucket, so it never bursts ahead of the model.
inline constexpr std::chrono::microseconds kBurst{5000};

class LinkShaper {
 public:
  /// `burst`: how far behind real time the bucket may be (tokens saved while idle).
  LinkShaper(std::string name, BitsPerSecond rate, std::chrono::nanoseconds burst);
  /// Books `bytes` no earlier than `ready` (and no earlier than now − burst); returns when they
  /// have left the link. Thread-safe: agents on different threads share a link.
  Clock::time_point book(Clock::time_point ready, std::int64_t bytes);
  const std::string& name() const { return name_; }
  BitsPerSecond rate() const { return rate_; }
  std::int64_t booked_bytes() const;

 private:
  std::string name_;
  BitsPerSecond rate_;
  std::chrono::nanoseconds burst_;
  mutable std::mutex mu_;
  Clock::time_point next_free_{};
  std::int64_t booked_bytes_ = 0;
};

/// The link directions a transfer crosses, and their summed one-way latency.
struct ShapedPath {
  std::vector<LinkShaper*> links;  ///< empty: unshaped
  std::chrono::nanoseconds latency{0};
  /// Books every link; the frame has left the bottleneck at the returned time.
  Clock::time_point book(Clock::time_point ready, std::int64_t bytes) const;
  /// The slowest link's rate (0 when unshaped).
  BitsPerSecond bottleneck() const;
};

}  // namespace kvshift::testbed
