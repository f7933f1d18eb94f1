// Percentiles of a sample, for every folder that summarises one. Both take the
// sample sorted ascending and q in [0, 1]. `percentile` is the project's rule:
// linear interpolation between the two closest ranks (numpy's default, Hyndman
// and Fan type 7). `nearest_rank_percentile` returns a value of the sample
// itself: the bootstrap gates and intervals of the calibration take order
// statistics of the resampled means, and the run summary's p50/p90/p99 (pinned
// by the golden files) are nearest-rank. `nearest_rank_percentiles` takes the
// same order statistics from an unsorted sample by selection (O(n) each instead
// of an O(n log n) sort: a fleet run summarises ten million samples).
// Leaves out: weights, NaN handling.
#pragma once

#include <span>
#include <vector>

namespace kvshift::util {

/// Percentile q in [0, 1] of ascending `sorted` (non-empty): linear interpolation between the
/// closest ranks, sorted[lo] + (pos − lo)·(sorted[lo+1] − sorted[lo]) at pos = q·(n − 1).
double percentile(std::span<const double> sorted, double q);

/// Nearest-rank percentile q in [0, 1] of ascending `sorted` (non-empty): sorted[k − 1] with
/// k = ⌈q·n⌉ clamped to [1, n] (q·n within 1e-9 above an integer counts as that integer).
double nearest_rank_percentile(std::span<const double> sorted, double q);

/// nearest_rank_percentile of `values` (non-empty, any order) at each of `qs` (ascending, in
/// [0, 1]), equal to sorting first. `values` is reordered (partitioned around those ranks).
std::vector<double> nearest_rank_percentiles(std::span<double> values, std::span<const double> qs);

}  // namespace kvshift::util
