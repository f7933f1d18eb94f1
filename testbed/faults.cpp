// Fault spec parsing (strict: every key known, every value in range) and the dice.
#include "testbed/faults.hpp"

#include <charconv>
#include <cstdio>
#include <sstream>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"

namespace kvshift::testbed {
namespace {

/// The largest share of frames the faults may lose (drop + corrupt + disconnect).
constexpr double kMaxLoss = 0.75;

double probability(const std::string& flag, const std::string& key, const std::string& value) {
  double p = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, p);
  if (ec != std::errc() || ptr != end || !(p >= 0 && p <= 1)) {
    throw InputError(flag + ": " + key + " must be a probability in [0, 1] (got \"" + value +
                     "\")");
  }
  return p;
}

double duration_s(const std::string& flag, const std::string& key, const std::string& value) {
  return parse_duration(value, flag + " " + key).value;
}

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

FaultSpec parse_faults(const std::string& text, const std::string& flag) {
  FaultSpec f;
  if (text.empty() || text == "none") return f;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InputError(flag + ": expected key=value (got \"" + item + "\")");
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "drop")
      f.drop = probability(flag, key, value);
    else if (key == "corrupt")
      f.corrupt = probability(flag, key, value);
    else if (key == "disconnect")
      f.disconnect = probability(flag, key, value);
    else if (key == "delay")
      f.delay_s = duration_s(flag, key, value);
    else if (key == "delay_p")
      f.delay_p = probability(flag, key, value);
    else if (key == "stall")
      f.stall_s = duration_s(flag, key, value);
    else if (key == "stall_p")
      f.stall_p = probability(flag, key, value);
    else if (key == "seed") {
      std::uint64_t s = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
      if (ec != std::errc() || ptr != value.data() + value.size()) {
        throw InputError(flag + ": seed must be a whole number (got \"" + value + "\")");
      }
      f.seed = s;
    } else {
      throw InputError(
          flag + ": unknown fault \"" + key +
          "\" (known: drop, corrupt, delay, delay_p, disconnect, stall, stall_p, seed)");
    }
  }
  if (f.delay_s > 10 || f.stall_s > 10) throw InputError(flag + ": delay and stall must be <= 10s");
  // A frame is lost with probability drop + corrupt + disconnect (about); at kMaxLoss and
  // above a transfer would resend for minutes or forever (drop=1: nothing ever arrives).
  const double loss = f.drop + f.corrupt + f.disconnect;
  if (loss > kMaxLoss) {
    char got[64];
    std::snprintf(got, sizeof got, "%g", loss);
    throw InputError(flag + ": drop + corrupt + disconnect must be at most 0.75 (got " + got +
                     "): with more frames lost, a transfer resends for minutes, and at 1 "
                     "nothing ever arrives");
  }
  return f;
}

std::string describe(const FaultSpec& f) {
  std::ostringstream s;
  auto add = [&](const char* k, double v) {
    if (v > 0) s << (s.tellp() > 0 ? "," : "") << k << "=" << v;
  };
  add("drop", f.drop);
  add("corrupt", f.corrupt);
  add("disconnect", f.disconnect);
  add("delay_s", f.delay_s);
  add("stall_s", f.stall_s);
  if (s.tellp() == 0) return "none";
  s << ",seed=" << f.seed;
  return s.str();
}

FaultDice::FaultDice(const FaultSpec& spec, std::uint64_t transfer, std::uint64_t attempt)
    : spec_(spec), rng_(splitmix(splitmix(spec.seed ^ splitmix(transfer)) + attempt)) {}

bool FaultDice::chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

FrameFate FaultDice::next() {
  FrameFate f;
  // Every draw is made whatever the earlier ones gave, so one fault's probability does not
  // shift the sequence another fault sees.
  f.disconnect = chance(spec_.disconnect);
  if (chance(spec_.stall_s > 0 ? spec_.stall_p : 0)) f.stall_s = spec_.stall_s;
  const bool delayed = chance(spec_.delay_s > 0 ? spec_.delay_p : 0);
  const double delay = std::uniform_real_distribution<double>(0, 1)(rng_) * spec_.delay_s;
  if (delayed) f.delay_s = delay;
  f.drop = chance(spec_.drop);
  f.corrupt = chance(spec_.corrupt);
  f.corrupt_bit = rng_();
  return f;
}

}  // namespace kvshift::testbed
