// SimTime: simulated time as a signed 64-bit count of nanoseconds (about 292
// years of range). Integer time makes event order exact and reproducible on
// every machine. Conversions from the cost model's double seconds round to the
// nearest nanosecond (halves away from zero); that is the only rounding rule in
// sim/, and every duration is rounded once, when it enters the simulator.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

#include "cost_model/units.hpp"

namespace kvshift::sim {

/// A point in, or a span of, simulated time in integer nanoseconds.
struct SimTime {
  std::int64_t ns = 0;

  constexpr auto operator<=>(const SimTime&) const = default;
  constexpr SimTime operator+(SimTime o) const { return {ns + o.ns}; }
  constexpr SimTime operator-(SimTime o) const { return {ns - o.ns}; }
  constexpr SimTime& operator+=(SimTime o) {
    ns += o.ns;
    return *this;
  }
  /// This time in (double) seconds.
  constexpr double seconds() const { return static_cast<double>(ns) / 1e9; }
  /// As the cost model's Seconds.
  constexpr Seconds to_seconds() const { return {seconds()}; }

  /// The largest representable time ("never").
  static constexpr SimTime max() { return {std::numeric_limits<std::int64_t>::max()}; }
  static constexpr SimTime zero() { return {0}; }
  static constexpr SimTime from_ns(std::int64_t n) { return {n}; }
};

/// Nearest nanosecond to `seconds` (halves away from zero); saturates at SimTime::max().
inline SimTime from_seconds(double seconds) { return {round_to_ns(seconds)}; }
/// Nearest nanosecond to a cost-model duration.
inline SimTime from_seconds(Seconds s) { return from_seconds(s.value); }

/// Literal helpers for tests and generators.
constexpr SimTime nanoseconds(std::int64_t n) { return {n}; }
constexpr SimTime microseconds(std::int64_t n) { return {n * 1'000}; }
constexpr SimTime milliseconds(std::int64_t n) { return {n * 1'000'000}; }
constexpr SimTime seconds(std::int64_t n) { return {n * 1'000'000'000}; }

}  // namespace kvshift::sim
