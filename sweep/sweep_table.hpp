// sweep.csv: one row per point - the point number, its seed, the swept
// values as written, then a fixed list of summary metrics per strategy
// (strategy.metric columns, strategies in the scenario's order), and with
// several deployments a shorter list per deployment (strategy.deployment.metric).
// Every cell
// comes from the point's summary.json, which holds only simulated values, so
// the table is the same on threads, under MPI and after a resume.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/strategy_metrics.hpp"
#include "sweep/sweep_axes.hpp"

namespace kvshift::sweep {

/// One metric column: a name and where it lives in a strategy's summary object.
struct MetricColumn {
  const char* name;     ///< column suffix, e.g. "recovery_p99_s"
  const char* pointer;  ///< JSON pointer inside strategies.<s>, e.g. "/recovery/p99_s"
};

/// The metric columns of sweep.csv, in order.
const std::vector<MetricColumn>& metric_columns();
/// Each deployment's columns (pointers inside strategies.<s>.deployments.<d>), in order.
const std::vector<MetricColumn>& deployment_columns();

/// The header line (no newline) for `axes`, `strategies` and `deployments` (names; empty
/// with one model).
std::string sweep_header(const std::vector<Axis>& axes, const std::vector<std::string>& strategies,
                         const std::vector<std::string>& deployments = {});

/// One row (no newline) for point `k` with `seed` from its strategies' metrics.
/// A metric a strategy lacks (no recoveries: no p99) or a strategy the point lacks is empty.
std::string sweep_row(const std::vector<Axis>& axes, std::uint64_t k, std::uint64_t seed,
                      const std::vector<std::string>& strategies,
                      const std::vector<reports::NamedMetrics>& metrics,
                      const std::vector<std::string>& deployments = {});

}  // namespace kvshift::sweep
