// Percentiles (see percentile.hpp).
#include "util/percentile.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kvshift::util {
namespace {

void check_q(double q, const char* what) {
  if (!(q >= 0.0 && q <= 1.0)) {
    throw std::invalid_argument(std::string(what) + ": q must be in [0, 1] (got " +
                                std::to_string(q) + ")");
  }
}

void check(std::span<const double> sorted, double q, const char* what) {
  if (sorted.empty()) throw std::invalid_argument(std::string(what) + ": no values");
  check_q(q, what);
  if (!std::is_sorted(sorted.begin(), sorted.end())) {
    throw std::invalid_argument(std::string(what) + ": values must be sorted ascending");
  }
}

// The 0-based index of the nearest-rank percentile q of n values.
std::size_t nearest_rank_index(std::size_t n, double q) {
  const auto count = static_cast<double>(n);
  const double rank = std::ceil(q * count - 1e-9);
  return static_cast<std::size_t>(std::clamp(rank, 1.0, count)) - 1;
}

}  // namespace

double percentile(std::span<const double> sorted, double q) {
  check(sorted, q, "percentile");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double nearest_rank_percentile(std::span<const double> sorted, double q) {
  check(sorted, q, "nearest_rank_percentile");
  return sorted[nearest_rank_index(sorted.size(), q)];
}

std::vector<double> nearest_rank_percentiles(std::span<double> values, std::span<const double> qs) {
  if (values.empty()) throw std::invalid_argument("nearest_rank_percentiles: no values");
  for (std::size_t i = 0; i < qs.size(); ++i) {
    check_q(qs[i], "nearest_rank_percentiles");
    if (i > 0 && qs[i] < qs[i - 1]) {
      throw std::invalid_argument("nearest_rank_percentiles: qs must be ascending");
    }
  }
  // Each selection partitions the rest, so the next one searches only above it.
  std::vector<double> out;
  auto from = values.begin();
  for (const double q : qs) {
    const auto at =
        values.begin() + static_cast<std::ptrdiff_t>(nearest_rank_index(values.size(), q));
    std::nth_element(from, at, values.end());
    from = at;
    out.push_back(*at);
  }
  return out;
}

}  // namespace kvshift::util
