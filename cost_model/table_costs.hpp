// TableCosts: ComputeCosts answered from a measured cost table (`kvshift
// profile`). Each op's medians are interpolated log-log in the token count T
// and, for `reconstruct`, in the number of requests N sharing a predictor (for
// `decode`, in the batch B, with T the context per request): first along T for
// the two measured values around N, then along N. Outside the measured range
// the nearest segment's power law is extended; an op measured at a single point
// scales proportionally. Reconstruction time is scaled by (groups asked) /
// (groups measured); pruning by the bytes it moves, (1 + ρ) / (1 + ρ measured).
// An op the table lacks comes from the fallback, and sources() says so.
// Leaves out: dtype effects (the table is for the predictor dtype it was
// measured with).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"

namespace kvshift::cost_model {

/// One row of a cost table (field names as in the JSON file).
struct CostTableEntry {
  /// "prefill" | "decode" | "reconstruct" | "proxy_score" | "prune" | "predictor_load"
  std::string op;
  std::int64_t tokens = 0;   ///< decode: context tokens per request
  std::int64_t sharing = 1;  ///< reconstruct: requests sharing the predictors
  std::int64_t batch = 1;    ///< decode: requests in the step
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  int repeats = 0;
};

/// What a table was measured for, beside its rows.
struct TableInfo {
  std::string model;
  int measured_groups = 0;           ///< groups the measured reconstruction rebuilt
  std::optional<std::string> proxy;  ///< the proxy proxy_score was measured with
  std::optional<double> retention;   ///< ρ prune was measured at
  std::string origin;                ///< how sources() names the table ("costs.json (cpu: ...)")
  std::map<std::string, std::string> notes;  ///< per op: what its timing leaves out
};

class TableCosts final : public ComputeCosts {
 public:
  /// `fallback` (may be null, not owned) answers the ops the table has no rows for.
  /// Throws InputError for a row with non-positive sizes or times.
  TableCosts(TableInfo info, std::vector<CostTableEntry> entries,
             const ComputeCosts* fallback = nullptr);

  Seconds prefill(const ModelSpec& m, std::int64_t tokens) const override;
  /// Derived from the measured prefill rows (the default); the fallback's when there are none.
  Seconds extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const override;
  Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                      std::int64_t context_tokens) const override;
  Seconds reconstruct(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      std::int64_t requests, DType predictor_dtype) const override;
  Seconds proxy_score(const ModelSpec& proxy, const ModelSpec& target,
                      std::int64_t tokens) const override;
  Seconds prune(const ModelSpec& m, std::int64_t tokens, double retention) const override;
  std::vector<OpSource> sources() const override;

  /// Interpolated median of `op` at (tokens, second axis: sharing or batch); InputError if
  /// the table lacks `op`.
  double interpolate(const std::string& op, std::int64_t tokens, std::int64_t second = 1) const;
  /// Whether the table has rows for `op`.
  bool has(const std::string& op) const;
  const TableInfo& info() const { return info_; }

 private:
  void check_model(const ModelSpec& m) const;
  const ComputeCosts& fallback(const std::string& op) const;

  TableInfo info_;
  std::vector<CostTableEntry> entries_;
  const ComputeCosts* fallback_;
};

/// log-log interpolation through points (x ascending, x > 0, y > 0) at x; see TableCosts.
double interpolate_log_log(const std::vector<std::pair<double, double>>& points, double x);

/// Worst (p90 − p10) / median over `rows` (0 for none): the spread a report prints.
double worst_spread(const std::vector<CostTableEntry>& rows);

}  // namespace kvshift::cost_model
