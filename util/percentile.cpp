// Percentiles (see percentile.hpp).
#include "util/percentile.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kvshift::util {
namespace {

void check(std::span<const double> sorted, double q, const char* what) {
  if (sorted.empty()) throw std::invalid_argument(std::string(what) + ": no values");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw std::invalid_argument(std::string(what) + ": q must be in [0, 1] (got " +
                                std::to_string(q) + ")");
  }
  if (!std::is_sorted(sorted.begin(), sorted.end())) {
    throw std::invalid_argument(std::string(what) + ": values must be sorted ascending");
  }
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
  const auto n = static_cast<double>(sorted.size());
  const double rank = std::ceil(q * n - 1e-9);
  const auto k = static_cast<std::size_t>(std::clamp(rank, 1.0, n));
  return sorted[k - 1];
}

}  // namespace kvshift::util
