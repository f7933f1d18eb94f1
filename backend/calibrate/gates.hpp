// Quality gates of the RISK-KV selection: the mean ΔNLL, the one-sided 90 %
// bootstrap upper bound of the mean (Upper-90), Upper-90 confirmed on an
// independent split (Stable-split) and the share gate (share:s): the exact
// one-sided 90 % Clopper–Pearson upper bound of the share of requests whose
// own ΔNLL exceeds ε must be ≤ s. Plus the two-sided 95 % bootstrap interval
// of the mean and the Clopper–Pearson interval of a share the test report gives. The bootstrap
// resamples requests with replacement; ΔNLL values are already paired (reconstructed − exact on the
// same request), and with one seed every candidate is resampled with the same index draws.
// Quantiles use the nearest-rank rule (util::nearest_rank_percentile): the
// q-quantile of sorted m[0..B) is m[ceil(q·B) − 1], a resampled mean itself.
// Leaves out: BCa or studentised intervals.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvshift::backend::calibrate {

enum class Gate { kMean, kUpper90, kStableSplit, kShare };

/// A gate with its parameter.
struct GateRule {
  GateRule(Gate g = Gate::kUpper90, double s = 0.10) : gate(g), share(s) {}  // NOLINT: implicit
  Gate gate;
  double share;  ///< kShare: the largest accepted share of requests with ΔNLL_r > ε
  bool operator==(const GateRule& o) const {
    return gate == o.gate && (gate != Gate::kShare || share == o.share);
  }
};

/// "mean", "upper90", "stable-split", "share".
std::string_view gate_name(Gate g);
/// "upper90", "share:0.1", ...
std::string rule_name(const GateRule& r);
/// Inverse of rule_name ("share:S" with S in (0, 1)); throws InputError naming `field`.
GateRule parse_gate(std::string_view text, std::string_view field);

/// P(X <= x) for X ~ Binomial(n, p).
double binomial_cdf(int x, int n, double p);
/// Clopper–Pearson one-sided upper bound at `level` of a share seen as x of n: the p with
/// P(X <= x | p) = 1 − level (1 when x = n).
double share_upper(int x, int n, double level);
/// Clopper–Pearson one-sided lower bound: the p with P(X >= x | p) = 1 − level (0 when x = 0).
double share_lower(int x, int n, double level);
/// Requests with value > eps.
int count_over(std::span<const double> values, double eps);

/// Arithmetic mean (0 for an empty span).
double mean_of(std::span<const double> values);

/// The sorted means of `resamples` bootstrap resamples of `values` (seeded, deterministic).
std::vector<double> bootstrap_means(std::span<const double> values, int resamples,
                                    std::uint64_t seed);

/// One-sided upper bound at `level` (0.9 for Upper-90) of the mean.
double bootstrap_upper(std::span<const double> values, double level, int resamples,
                       std::uint64_t seed);

/// Two-sided percentile interval at `level` (0.95): [low, high].
std::pair<double, double> bootstrap_interval(std::span<const double> values, double level,
                                             int resamples, std::uint64_t seed);

/// Fewest bootstrap resamples the gates accept.
inline constexpr int kMinResamples = 2000;

}  // namespace kvshift::backend::calibrate
