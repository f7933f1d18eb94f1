// Token-bucket booking; see shaper.hpp for why booking one frame at a time is fair.
#include "testbed/shaper.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvshift::testbed {

LinkShaper::LinkShaper(std::string name, BitsPerSecond rate, std::chrono::nanoseconds burst)
    : name_(std::move(name)), rate_(rate), burst_(burst) {
  if (!(rate.value > 0)) throw std::invalid_argument("LinkShaper: rate must be > 0");
}

Clock::time_point LinkShaper::book(Clock::time_point ready, std::int64_t bytes) {
  const auto wire = std::chrono::nanoseconds(
      static_cast<std::int64_t>(8.0 * static_cast<double>(bytes) / rate_.value * 1e9));
  std::lock_guard lock(mu_);
  const auto floor = Clock::now() - burst_;
  const auto start = std::max({ready, next_free_, floor});
  next_free_ = start + wire;
  booked_bytes_ += bytes;
  return next_free_;
}

std::int64_t LinkShaper::booked_bytes() const {
  std::lock_guard lock(mu_);
  return booked_bytes_;
}

Clock::time_point ShapedPath::book(Clock::time_point ready, std::int64_t bytes) const {
  Clock::time_point done = ready;
  for (LinkShaper* l : links) done = std::max(done, l->book(ready, bytes));
  return done;
}

BitsPerSecond ShapedPath::bottleneck() const {
  BitsPerSecond b{0};
  for (const LinkShaper* l : links) {
    if (b.value == 0 || l->rate().value < b.value) b = l->rate();
  }
  return b;
}

}  // namespace kvshift::testbed
