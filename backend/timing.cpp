// Timing helpers; see timing.hpp.
#include "backend/timing.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kvshift::backend {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) throw std::invalid_argument("percentile of no samples");
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (pos - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

OpTiming time_op(const std::string& op, std::int64_t tokens, std::int64_t sharing, int warmup,
                 int repeats, const std::function<void()>& run,
                 const std::function<void()>& prepare) {
  if (repeats < 1) throw std::invalid_argument("time_op: repeats must be >= 1");
  for (int i = 0; i < warmup; ++i) {
    if (prepare) prepare();
    run();
  }
  std::vector<double> s;
  for (int i = 0; i < repeats; ++i) {
    if (prepare) prepare();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return {.op = op,
          .tokens = tokens,
          .sharing = sharing,
          .median_s = percentile(s, 0.5),
          .p10_s = percentile(s, 0.1),
          .p90_s = percentile(s, 0.9),
          .repeats = repeats};
}

}  // namespace kvshift::backend
