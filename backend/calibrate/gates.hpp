// Quality gates of the RISK-KV selection: the mean ΔNLL, the one-sided 90 %
// bootstrap upper bound of the mean (Upper-90) and Upper-90 confirmed on an
// independent split (Stable-split), plus the two-sided 95 % bootstrap interval
// the test report gives. The bootstrap resamples requests with replacement;
// ΔNLL values are already paired (reconstructed − exact on the same request),
// and with one seed every candidate is resampled with the same index draws.
// Quantiles use the nearest-rank rule: q-quantile of sorted m[0..B) is
// m[ceil(q·B) − 1]. Leaves out: BCa or studentised intervals.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvshift::backend::calibrate {

enum class Gate { kMean, kUpper90, kStableSplit };

/// "mean", "upper90", "stable-split".
std::string_view gate_name(Gate g);
/// Inverse of gate_name; throws InputError naming `field`.
Gate parse_gate(std::string_view text, std::string_view field);

/// Arithmetic mean (0 for an empty span).
double mean_of(std::span<const double> values);

/// Nearest-rank quantile of ascending `sorted` (non-empty), q in (0, 1].
double nearest_rank_quantile(std::span<const double> sorted, double q);

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
