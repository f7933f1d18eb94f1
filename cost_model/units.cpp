// Unit-string parsing and human formatting. Parsing is deliberately strict:
// "100 Mbps" and "100Mbps" are fine, "100 mbps" (bits vs bytes is ambiguous
// in lower case beyond the suffix) and "100Mb" are not.
#include "cost_model/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include "cost_model/input_error.hpp"

namespace kvshift {
namespace {

struct Unit {
  std::string_view suffix;
  double factor;  // to the internal unit (bytes, bit/s, seconds)
};

constexpr std::array kByteUnits{
    Unit{"B", 1.0},         Unit{"KB", 1e3},           Unit{"MB", 1e6},
    Unit{"GB", 1e9},        Unit{"TB", 1e12},          Unit{"KiB", 1024.0},
    Unit{"MiB", 1048576.0}, Unit{"GiB", 1073741824.0}, Unit{"TiB", 1099511627776.0},
};

constexpr std::array kRateUnits{
    Unit{"bps", 1.0},
    Unit{"Kbps", 1e3},
    Unit{"kbps", 1e3},
    Unit{"Mbps", 1e6},
    Unit{"Gbps", 1e9},
    Unit{"Tbps", 1e12},
    Unit{"B/s", 8.0},
    Unit{"KB/s", 8e3},
    Unit{"MB/s", 8e6},
    Unit{"GB/s", 8e9},
    Unit{"TB/s", 8e12},
    Unit{"KiB/s", 8.0 * 1024.0},
    Unit{"MiB/s", 8.0 * 1048576.0},
    Unit{"GiB/s", 8.0 * 1073741824.0},
};

constexpr std::array kTimeUnits{
    Unit{"ns", 1e-9}, Unit{"us", 1e-6},  Unit{"µs", 1e-6},  Unit{"ms", 1e-3},
    Unit{"s", 1.0},   Unit{"min", 60.0}, Unit{"h", 3600.0},
};

[[noreturn]] void fail(std::string_view field, std::string_view text, std::string_view expected) {
  throw InputError(std::string(field) + ": expected " + std::string(expected) + " (got \"" +
                   std::string(text) + "\")");
}

// Splits "12.5 MB/s" into (12.5, "MB/s"); fails unless the number is a plain
// non-negative decimal and the remainder is a unit of `table`.
template <std::size_t N>
double parse_with(std::string_view text, std::string_view field, const std::array<Unit, N>& table,
                  std::string_view expected) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             text[i] == 'e' || text[i] == 'E' ||
                             ((text[i] == '+' || text[i] == '-') && i > 0 &&
                              (text[i - 1] == 'e' || text[i - 1] == 'E')))) {
    // 'e' only counts as an exponent when a digit follows ("1e3"), so that
    // units starting with a letter are not swallowed.
    if ((text[i] == 'e' || text[i] == 'E') &&
        (i + 1 >= text.size() || !(std::isdigit(static_cast<unsigned char>(text[i + 1])) ||
                                   text[i + 1] == '+' || text[i + 1] == '-'))) {
      break;
    }
    ++i;
  }
  if (i == 0 || !std::isdigit(static_cast<unsigned char>(text[0]))) fail(field, text, expected);
  double number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, number);
  if (ec != std::errc() || end != text.data() + i || !std::isfinite(number)) {
    fail(field, text, expected);
  }
  std::string_view rest = text.substr(i);
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  for (const Unit& u : table) {
    if (rest == u.suffix) return number * u.factor;
  }
  fail(field, text, expected);
}

std::string fixed(double v, int decimals) {
  return format_number(("%." + std::to_string(decimals) + "f").c_str(), v);
}

}  // namespace

std::string format_number(const char* printf_format, double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, printf_format, v);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf)
    return std::string(buf, static_cast<std::size_t>(n));
  std::string out(static_cast<std::size_t>(n), '\0');  // a long %f: print again at full size
  std::snprintf(out.data(), out.size() + 1, printf_format, v);
  return out;
}

Bytes parse_bytes(std::string_view text, std::string_view field) {
  const double v =
      parse_with(text, field, kByteUnits, "a size such as \"4096B\", \"512MB\" or \"2GiB\"");
  if (v > 9.0e18) fail(field, text, "a size below 8 EiB");
  return Bytes{static_cast<std::int64_t>(std::llround(v))};
}

BitsPerSecond parse_bandwidth(std::string_view text, std::string_view field) {
  return {parse_with(text, field, kRateUnits,
                     "a bandwidth such as \"100Mbps\", \"10Gbps\" or \"12.5MB/s\"")};
}

Seconds parse_duration(std::string_view text, std::string_view field) {
  return {parse_with(text, field, kTimeUnits, "a duration such as \"20ms\", \"50us\" or \"1.5s\"")};
}

std::string format_mib(Bytes b, int decimals) { return fixed(b.mib(), decimals) + " MiB"; }

std::string format_ms(Seconds s, int decimals) { return fixed(s.value * 1e3, decimals) + " ms"; }

std::string format_bandwidth(BitsPerSecond r) {
  constexpr std::array<std::pair<double, const char*>, 4> kSteps{
      {{1e12, "Tbps"}, {1e9, "Gbps"}, {1e6, "Mbps"}, {1e3, "Kbps"}}};
  for (auto [scale, name] : kSteps) {
    if (r.value >= scale) return fixed(r.value / scale, 3) + " " + name;
  }
  return fixed(r.value, 3) + " bps";
}

}  // namespace kvshift
