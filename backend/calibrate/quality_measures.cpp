// The measures that compare a policy with KVZip, its reference; see quality.hpp.
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <tuple>

#include "backend/calibrate/gates.hpp"
#include "backend/calibrate/quality.hpp"
#include "util/percentile.hpp"

namespace kvshift::backend::calibrate {

using Kept = std::vector<std::vector<std::int64_t>>;

double kept_recall(const Kept& kept, const Kept& reference) {
  if (kept.size() != reference.size() || kept.empty()) {
    throw std::invalid_argument("kept_recall: the kept sets need the same rows");
  }
  double sum = 0.0;
  for (std::size_t r = 0; r < kept.size(); ++r) {
    // Both lists ascend (top_k_per_head): a merge counts the common positions.
    std::size_t i = 0, j = 0, common = 0;
    while (i < kept[r].size() && j < reference[r].size()) {
      if (kept[r][i] == reference[r][j]) {
        ++common, ++i, ++j;
      } else if (kept[r][i] < reference[r][j]) {
        ++i;
      } else {
        ++j;
      }
    }
    sum += kept[r].empty() ? 1.0 : static_cast<double>(common) / kept[r].size();
  }
  return sum / static_cast<double>(kept.size());
}

double reference_kept_share(const Kept& kept, const Kept& reference, std::int64_t tokens,
                            const KeepPolicy& keep) {
  if (kept.size() != reference.size()) {
    throw std::invalid_argument("reference_kept_share: the kept sets need the same rows");
  }
  std::int64_t held = 0, common = 0;
  for (std::size_t r = 0; r < kept.size(); ++r) {
    for (std::int64_t t : reference[r]) {
      if (t < keep.sink_tokens || t >= tokens - keep.recent_window) continue;
      ++held;
      common += std::binary_search(kept[r].begin(), kept[r].end(), t) ? 1 : 0;
    }
  }
  return held == 0 ? std::nan("") : static_cast<double>(common) / static_cast<double>(held);
}

std::pair<double, double> recovered_share_interval(const std::vector<double>& random,
                                                   const std::vector<double>& policy,
                                                   const std::vector<double>& kvzip, int resamples,
                                                   std::uint64_t seed) {
  const std::size_t n = random.size();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  std::vector<double> shares;
  shares.reserve(static_cast<std::size_t>(resamples));
  for (int b = 0; b < resamples; ++b) {
    double r = 0, p = 0, k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t j = pick(rng);
      r += random[j];
      p += policy[j];
      k += kvzip[j];
    }
    // A resample where KVZip is no better than random has no defined share: count it as 0.
    shares.push_back(r - k > 0 ? (r - p) / (r - k) : 0.0);
  }
  std::sort(shares.begin(), shares.end());
  return {util::nearest_rank_percentile(shares, 0.025),
          util::nearest_rank_percentile(shares, 0.975)};
}

std::vector<PairedDifference> paired_against_leader(const std::vector<QualityRow>& rows,
                                                    int resamples, std::uint64_t seed) {
  std::vector<PairedDifference> out;
  std::vector<double> seen;  // ratios done, in the order rows give them
  for (const QualityRow& first : rows) {
    if (!first.retention || std::find(seen.begin(), seen.end(), *first.retention) != seen.end())
      continue;
    const double rho = *first.retention;
    seen.push_back(rho);
    const QualityRow* leader = nullptr;
    for (const QualityRow& row : rows) {
      if (row.retention != rho || row.method == "kvzip") continue;
      if (!leader || row.mean < leader->mean) leader = &row;
    }
    if (!leader) continue;
    for (const QualityRow& row : rows) {
      if (row.retention != rho || &row == leader) continue;
      if (row.per_request.size() != leader->per_request.size()) {
        throw std::invalid_argument("paired_against_leader: rows of different requests");
      }
      std::vector<double> diff(row.per_request.size());
      for (std::size_t i = 0; i < diff.size(); ++i)
        diff[i] = row.per_request[i] - leader->per_request[i];
      PairedDifference d{.retention = rho, .leader = leader->label, .label = row.label};
      d.mean = row.mean - leader->mean;
      std::tie(d.ci95_low, d.ci95_high) = bootstrap_interval(diff, 0.95, resamples, seed);
      out.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace kvshift::backend::calibrate
