// SLO objectives for `kvshift search`: "METRIC OP VALUE" clauses joined by
// "&&", over one strategy's summary object. METRIC is a dotted path into it
// (recovery.p99, ttft.p50, requests.failed, bytes.kv, goodput_tokens_per_s);
// a distribution statistic may omit its "_s" suffix. OP is <=, <, >= or >.
// VALUE takes the metric's unit: a duration for *_s metrics ("2s", "500ms"),
// bytes or a plain number for byte counts ("4GiB"), a plain number otherwise.
// A malformed clause or an unknown metric is an InputError before anything runs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/strategy_metrics.hpp"

namespace kvshift::sweep {

enum class Comparison { kLessEqual, kLess, kGreaterEqual, kGreater };

struct Clause {
  std::string metric;   ///< as written, "recovery.p99"
  std::string pointer;  ///< inside a strategy summary, "/recovery/p99_s"
  Comparison op = Comparison::kLessEqual;
  double bound = 0;  ///< in the metric's unit (seconds, bytes, count)
  std::string text;  ///< the clause as written
};

struct Objective {
  std::vector<Clause> clauses;
  std::string text;
};

/// Parses an objective; throws InputError naming --objective.
Objective parse_objective(std::string_view text);

/// One clause's outcome on a strategy summary: the value (empty if the run has none) and whether it
/// holds.
struct ClauseResult {
  std::optional<double> value;
  bool met = false;
};

/// Evaluates every clause on `strategy_summary` (strategies.<s> of summary.json).
std::vector<ClauseResult> evaluate(const Objective& objective,
                                   const nlohmann::json& strategy_summary);

/// Evaluates every clause on a strategy's metrics (by the pointers of its summary entry).
std::vector<ClauseResult> evaluate(const Objective& objective,
                                   const reports::StrategyMetrics& metrics);

}  // namespace kvshift::sweep
