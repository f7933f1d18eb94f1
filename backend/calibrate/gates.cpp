// Gate statistics; see gates.hpp.
#include "backend/calibrate/gates.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {

std::string_view gate_name(Gate g) {
  switch (g) {
    case Gate::kMean:
      return "mean";
    case Gate::kUpper90:
      return "upper90";
    case Gate::kStableSplit:
      return "stable-split";
  }
  return "?";
}

Gate parse_gate(std::string_view text, std::string_view field) {
  if (text == "mean") return Gate::kMean;
  if (text == "upper90" || text == "upper-90") return Gate::kUpper90;
  if (text == "stable-split" || text == "stable_split") return Gate::kStableSplit;
  throw InputError(std::string(field) + ": unknown gate \"" + std::string(text) +
                   "\" (expected mean, upper90 or stable-split)");
}

double mean_of(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double nearest_rank_quantile(std::span<const double> sorted, double q) {
  if (sorted.empty() || !(q > 0.0) || q > 1.0) {
    throw std::invalid_argument("nearest_rank_quantile: needs values and q in (0, 1]");
  }
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(q * n - 1e-9));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

std::vector<double> bootstrap_means(std::span<const double> values, int resamples,
                                    std::uint64_t seed) {
  if (values.empty() || resamples < 1) {
    throw std::invalid_argument("bootstrap: needs values and at least one resample");
  }
  std::mt19937_64 rng(seed);
  const std::size_t n = values.size();
  std::vector<double> means(static_cast<std::size_t>(resamples));
  for (double& m : means) {
    double sum = 0.0;
    // Index draws by rejection-free modulo of 64-bit words (bias < n/2^64).
    for (std::size_t i = 0; i < n; ++i) sum += values[rng() % n];
    m = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return means;
}

double bootstrap_upper(std::span<const double> values, double level, int resamples,
                       std::uint64_t seed) {
  const std::vector<double> means = bootstrap_means(values, resamples, seed);
  return nearest_rank_quantile(means, level);
}

std::pair<double, double> bootstrap_interval(std::span<const double> values, double level,
                                             int resamples, std::uint64_t seed) {
  const std::vector<double> means = bootstrap_means(values, resamples, seed);
  const double tail = (1.0 - level) / 2.0;
  return {nearest_rank_quantile(means, tail), nearest_rank_quantile(means, 1.0 - tail)};
}

}  // namespace kvshift::backend::calibrate
