#include "cost_model/compute_costs.hpp"

#include <algorithm>

namespace kvshift::cost_model {

Seconds ComputeCosts::extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const {
  if (tokens <= 0) return {0};
  const Seconds alone = prefill(m, tokens);
  if (prefix <= 0) return alone;
  const double increment =
      prefill(m, prefix + tokens).value - prefill(m, prefix).value + prefill(m, 1).value;
  return {std::max(alone.value, increment)};
}

}  // namespace kvshift::cost_model
