// TableCosts: ComputeCosts answered from a measured cost table (`kvshift
// profile`). Each op's medians are interpolated log-log in the token count T
// and, for `reconstruct`, in the number of requests N sharing a predictor:
// first along T for the two measured sharing values around N, then along N.
// Outside the measured range the nearest segment's power law is extended; an
// op measured at a single point scales proportionally. Reconstruction time is
// scaled by (groups asked) / (groups measured). Leaves out: dtype effects (the
// table is for the predictor dtype it was measured with) and decode steps,
// which come from an optional fallback.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/compute_costs.hpp"

namespace kvshift::cost_model {

/// One row of a cost table (field names as in the JSON file).
struct CostTableEntry {
  std::string op;  ///< "prefill" | "reconstruct" | "proxy_score" | "prune"
  std::int64_t tokens = 0;
  std::int64_t sharing = 1;
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  int repeats = 0;
};

class TableCosts final : public ComputeCosts {
 public:
  /// `model`: the model the table was measured for; `measured_groups`: how many groups
  /// the measured reconstruction rebuilt. `fallback` (may be null, not owned) answers
  /// what the table lacks (decode steps). Throws InputError if an op has no rows.
  TableCosts(std::string model, int measured_groups, std::vector<CostTableEntry> entries,
             const ComputeCosts* fallback = nullptr);

  Seconds prefill(const ModelSpec& m, std::int64_t tokens) const override;
  Seconds decode_step(const ModelSpec& m, std::int64_t batch,
                      std::int64_t context_tokens) const override;
  Seconds reconstruct(const ModelSpec& m, const Topology& t, std::int64_t tokens,
                      std::int64_t requests, DType predictor_dtype) const override;

  /// Interpolated median of `op` at (tokens, sharing); InputError if the table lacks `op`.
  double interpolate(const std::string& op, std::int64_t tokens, std::int64_t sharing = 1) const;
  /// Whether the table has rows for `op`.
  bool has(const std::string& op) const;

 private:
  void check_model(const ModelSpec& m) const;

  std::string model_;
  int measured_groups_;
  std::vector<CostTableEntry> entries_;
  const ComputeCosts* fallback_;
};

/// log-log interpolation through points (x ascending, x > 0, y > 0) at x; see TableCosts.
double interpolate_log_log(const std::vector<std::pair<double, double>>& points, double x);

}  // namespace kvshift::cost_model
