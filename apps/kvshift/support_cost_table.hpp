// The cost table of a measurement: what `kvshift profile` writes, and what a
// run with live costs writes beside its results (live-costs.json), so the
// shapes a simulation measured can be reused as "profile:live-costs.json".
// Both say the machine, the exact inputs (paths and digests) and, per op, what
// its timing leaves out on that backend.
#pragma once

#include <vector>

#include "backend/profiler.hpp"
#include "input/cost_table.hpp"

namespace kvshift::app {

/// A table of `rows` measured by `profiler` for `request` (its models, topology, inputs, ρ).
input::CostTable measured_table(const backend::Profiler& profiler,
                                const backend::ProfileRequest& request,
                                const std::vector<backend::OpTiming>& rows);

}  // namespace kvshift::app
