// Strong types for the quantities kvshift computes with, and the strict parser
// for unit strings ("100Mbps", "12.5MB/s", "20ms", "2GiB"). Internally every
// size is bytes, every time seconds (or integer ns in sim/), every rate bit/s;
// unit strings are converted once, at parse time.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace kvshift {

/// A byte count. Integral: KV caches and predictors are whole bytes.
struct Bytes {
  std::int64_t count = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return {count + o.count}; }
  constexpr Bytes operator-(Bytes o) const { return {count - o.count}; }
  constexpr Bytes operator*(std::int64_t n) const { return {count * n}; }
  constexpr double bits() const { return 8.0 * static_cast<double>(count); }
  constexpr double mib() const { return static_cast<double>(count) / (1024.0 * 1024.0); }
};

/// A link or bus rate in bits per second.
struct BitsPerSecond {
  double value = 0;
  constexpr auto operator<=>(const BitsPerSecond&) const = default;
};

/// Floating-point operations per second (a GPU's peak or achieved rate).
struct FlopsPerSecond {
  double value = 0;
};

/// A duration in seconds (the cost model's time unit; sim/ uses integer ns).
struct Seconds {
  double value = 0;
  constexpr auto operator<=>(const Seconds&) const = default;
  constexpr Seconds operator+(Seconds o) const { return {value + o.value}; }
  constexpr Seconds operator-(Seconds o) const { return {value - o.value}; }
};

/// Nearest nanosecond to `seconds` (halves away from zero), saturating at the int64 range
/// (+inf and NaN saturate high). The one rounding rule of durations: sim/ and the move
/// estimator both use it, so a closed form and a simulated move agree to the nanosecond.
inline std::int64_t round_to_ns(double seconds) {
  const double ns = seconds * 1e9;
  if (!(ns < 9.2e18)) return std::numeric_limits<std::int64_t>::max();
  if (ns < -9.2e18) return std::numeric_limits<std::int64_t>::min();
  return std::llround(ns);
}

/// Time to push `size` through a pipe of rate `rate` (no latency).
constexpr Seconds serialisation_time(Bytes size, BitsPerSecond rate) {
  return {size.bits() / rate.value};
}

// Strict parsers: a number (no sign, optional fraction and exponent), an
// optional single space, a known unit. Anything else throws InputError whose
// message names `field` and the value. Zero is accepted; callers that need a
// positive value check it (they know the field's constraint).

/// "2GiB", "512MB", "4096B", "1.5KiB". Decimal (KB = 1000) and binary (KiB = 1024).
Bytes parse_bytes(std::string_view text, std::string_view field);
/// "100Mbps", "10Gbps", "12.5MB/s", "25GB/s", "1GiB/s", "800bps".
BitsPerSecond parse_bandwidth(std::string_view text, std::string_view field);
/// "20ms", "50us", "1.5s", "2min", "1h", "100ns".
Seconds parse_duration(std::string_view text, std::string_view field);

/// One number as printf prints it with `printf_format`, which holds exactly one conversion of
/// a double ("%.3f", "%g", "%.1f %%"): the project's one number formatter.
std::string format_number(const char* printf_format, double v);
/// The shortest of printf's %g ("0.05", "1e+09").
inline std::string format_g(double v) { return format_number("%g", v); }

/// "2.000 MiB" with `decimals` places.
std::string format_mib(Bytes b, int decimals = 3);
/// "503.316 ms".
std::string format_ms(Seconds s, int decimals = 3);
/// "100 Mbps", "1.25 Gbps": picks the unit that keeps the mantissa in [1, 1000).
std::string format_bandwidth(BitsPerSecond r);

}  // namespace kvshift
