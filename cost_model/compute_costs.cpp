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

Seconds ComputeCosts::mixed_step(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens,
                                 std::int64_t batch, std::int64_t context_tokens) const {
  const Seconds chunk = extend(m, prefix, tokens);
  if (batch <= 0) return chunk;
  const double rider = decode_step(m, batch, context_tokens).value - decode_step(m, 1, 0).value;
  return {chunk.value + std::max(0.0, rider)};
}

}  // namespace kvshift::cost_model
