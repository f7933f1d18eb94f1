// Gate statistics; see gates.hpp.
#include "backend/calibrate/gates.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "util/percentile.hpp"

namespace kvshift::backend::calibrate {

std::string_view gate_name(Gate g) {
  switch (g) {
    case Gate::kMean:
      return "mean";
    case Gate::kUpper90:
      return "upper90";
    case Gate::kStableSplit:
      return "stable-split";
    case Gate::kShare:
      return "share";
  }
  return "?";
}

std::string rule_name(const GateRule& r) {
  if (r.gate != Gate::kShare) return std::string(gate_name(r.gate));
  return "share:" + format_number("%g", r.share);
}

GateRule parse_gate(std::string_view text, std::string_view field) {
  if (text == "mean") return {Gate::kMean};
  if (text == "upper90" || text == "upper-90") return {Gate::kUpper90};
  if (text == "stable-split" || text == "stable_split") return {Gate::kStableSplit};
  if (text.starts_with("share:")) {
    const std::string value(text.substr(6));
    double s = 0.0;
    std::size_t used = 0;
    try {
      s = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size() || !std::isfinite(s)) {
      throw InputError(std::string(field) + " " + std::string(text) +
                       ": expected share:S with S a number in (0, 1), e.g. share:0.10");
    }
    if (!(s > 0.0 && s < 1.0)) {
      throw InputError(std::string(field) + " " + std::string(text) +
                       ": the share must lie in (0, 1) (the largest accepted share of requests "
                       "over eps)");
    }
    return {Gate::kShare, s};
  }
  throw InputError(std::string(field) + ": unknown gate \"" + std::string(text) +
                   "\" (expected mean, upper90, stable-split or share:S)");
}

double binomial_cdf(int x, int n, double p) {
  if (n < 0) throw std::invalid_argument("binomial_cdf: n < 0");
  if (x < 0) return 0.0;
  if (x >= n) return 1.0;
  if (p <= 0.0) return 1.0;
  if (p >= 1.0) return 0.0;
  const double lp = std::log(p), lq = std::log1p(-p), ln = std::lgamma(n + 1.0);
  double sum = 0.0;
  for (int k = 0; k <= x; ++k) {
    sum += std::exp(ln - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * lp + (n - k) * lq);
  }
  return std::min(1.0, sum);
}

namespace {
// The p in [0, 1] where the decreasing f(p) crosses `target` (bisection to double precision).
template <class F>
double solve_decreasing(F f, double target) {
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) > target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}
void check_share_args(int x, int n, double level) {
  if (n < 1 || x < 0 || x > n || !(level > 0.0 && level < 1.0)) {
    throw std::invalid_argument("share bound: needs 0 <= x <= n, n >= 1, level in (0, 1)");
  }
}
}  // namespace

double share_upper(int x, int n, double level) {
  check_share_args(x, n, level);
  if (x == n) return 1.0;
  return solve_decreasing([&](double p) { return binomial_cdf(x, n, p); }, 1.0 - level);
}

double share_lower(int x, int n, double level) {
  check_share_args(x, n, level);
  if (x == 0) return 0.0;
  // P(X >= x | p) = 1 − cdf(x − 1) increases with p: solve cdf(x − 1) = level.
  return solve_decreasing([&](double p) { return binomial_cdf(x - 1, n, p); }, level);
}

int count_over(std::span<const double> values, double eps) {
  return static_cast<int>(
      std::count_if(values.begin(), values.end(), [&](double v) { return v > eps; }));
}

double mean_of(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
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
  return util::nearest_rank_percentile(means, level);
}

std::pair<double, double> bootstrap_interval(std::span<const double> values, double level,
                                             int resamples, std::uint64_t seed) {
  const std::vector<double> means = bootstrap_means(values, resamples, seed);
  const double tail = (1.0 - level) / 2.0;
  return {util::nearest_rank_percentile(means, tail),
          util::nearest_rank_percentile(means, 1.0 - tail)};
}

}  // namespace kvshift::backend::calibrate
