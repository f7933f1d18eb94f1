#include "cost_model/cost_record.hpp"

#include <cmath>
#include <string>

#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

void check(const CostQuery& q) {
  if (q.tokens <= 0) {
    throw InputError("--tokens: must be > 0 (got " + std::to_string(q.tokens) + ")");
  }
  if (q.sharing <= 0) {
    throw InputError("--sharing: must be >= 1 (got " + std::to_string(q.sharing) + ")");
  }
  if (!(q.retention > 0 && q.retention <= 1)) {
    throw InputError("--retention: must be in (0, 1] (got " + std::to_string(q.retention) + ")");
  }
  if (q.held_tokens && !(*q.held_tokens >= 0 && *q.held_tokens < q.tokens)) {
    throw InputError("--held: must be in [0, --tokens) = [0, " + std::to_string(q.tokens) +
                     ") (got " + std::to_string(*q.held_tokens) + ")");
  }
  if (q.held_tokens && !q.path)
    throw InputError("--held: needs --bandwidth (the path it ships on)");
  if (q.path) {
    if (!(q.path->bandwidth.value > 0) || !std::isfinite(q.path->bandwidth.value)) {
      throw InputError("--bandwidth: must be > 0");
    }
    if (!(q.path->latency.value >= 0) || !std::isfinite(q.path->latency.value)) {
      throw InputError("--latency: must be >= 0");
    }
  }
}

}  // namespace

CostRecord evaluate(const CostQuery& q) {
  check(q);
  CostRecord r;
  r.storage = storage(*q.model, *q.omission, q.tokens, {q.predictor_dtype, q.sharing});
  if (q.path) {
    r.latency = latency(*q.model, *q.omission, q.tokens, r.storage, *q.path, *q.gpu, *q.compute,
                        {q.retention, q.predictor_dtype, q.engine, q.held_tokens});
    if (q.prefill_compute) {
      const Seconds pre = q.prefill_compute->prefill(*q.model, q.tokens);
      const LatencyReport& l = *r.latency;
      PdReport& pd = r.pd.emplace();
      pd.prefill_on_prefill_gpu = pre;
      pd.decode_side_prefill = l.prefill;
      for (const Strategy s : kConcreteStrategies) {
        if (s == Strategy::kTokenReplay || s == Strategy::kPrefixRecompute || !l.move.has(s)) {
          continue;
        }
        pd.ttft.set(s, pre + l.move.at(s));
      }
    }
  }
  return r;
}

}  // namespace kvshift::cost_model
