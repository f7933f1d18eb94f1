// A profiled cost table with what a reader must know beside its numbers, in
// each table op's source (the console's table and summary.json's
// cost_sources): the shapes a run asked for past the largest one measured
// ("decode at 6,000 tokens extrapolated 1.46x past the largest measured
// (4,096)"), and a model folder the table recorded whose weights' digest is no
// longer the one measured. Leaves out: shapes below the smallest measured (a
// small recompute is common and its extrapolation short) and tables whose
// model folder is not on this machine (nothing to compare).
#pragma once

#include <memory>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "input/cost_table.hpp"

namespace kvshift::app {

/// `table` (made from `info`, read from `path`), its sources noting extrapolation and changed
/// weights; `keep_alive` is what `table` points into (its fallback roofline).
std::unique_ptr<cost_model::ComputeCosts> checked_table_costs(
    std::shared_ptr<const cost_model::ComputeCosts> table, std::shared_ptr<const void> keep_alive,
    const input::CostTable& info, const std::string& path);

}  // namespace kvshift::app
