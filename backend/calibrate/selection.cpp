// RISK-KV group selection (the omission plan); see selection.hpp.
#include "backend/calibrate/selection.hpp"

#include <algorithm>
#include <numeric>

namespace kvshift::backend::calibrate {

std::vector<int> order_by_risk_per_byte(const std::vector<SingleRisk>& singles) {
  std::vector<std::size_t> idx(singles.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](std::size_t i) { return singles[i].risk / std::max(singles[i].saved_bytes, 1.0); };
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    if (key(a) != key(b)) return key(a) < key(b);
    return singles[a].group < singles[b].group;
  });
  std::vector<int> order;
  for (std::size_t i : idx) order.push_back(singles[i].group);
  return order;
}

bool passes(const PrefixOutcome& p, const GateRule& rule, double eps) {
  switch (rule.gate) {
    case Gate::kMean:
      return p.mean <= eps;
    case Gate::kUpper90:
      return p.upper90 <= eps;
    case Gate::kStableSplit:
      return p.upper90 <= eps && p.confirm_upper90.has_value() && *p.confirm_upper90 <= eps;
    case Gate::kShare:
      return !p.deltas.empty() && share_upper(count_over(p.deltas, eps),
                                              static_cast<int>(p.deltas.size()), 0.9) <= rule.share;
  }
  return false;
}

std::optional<std::size_t> choose_prefix(const std::vector<PrefixOutcome>& prefixes,
                                         const GateRule& rule, double eps) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    const PrefixOutcome& p = prefixes[i];
    if (!passes(p, rule, eps)) continue;
    if (!best) {
      best = i;
      continue;
    }
    const PrefixOutcome& b = prefixes[*best];
    if (p.omitted_bytes > b.omitted_bytes ||
        (p.omitted_bytes == b.omitted_bytes && p.mean < b.mean)) {
      best = i;
    }
  }
  return best;
}

}  // namespace kvshift::backend::calibrate
