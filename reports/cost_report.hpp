// The cost record as people and scripts read it: a JSON object with stable
// field names (scripts and CI depend on them) and a plain-text table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cost_model/cost_record.hpp"

namespace kvshift::reports {

/// The `kvshift cost --json` object for `q` and its evaluation `r`.
nlohmann::json cost_json(const cost_model::CostQuery& q, const cost_model::CostRecord& r);

/// A readable table of the same figures (MiB, ms, Mbps).
std::string cost_table(const cost_model::CostQuery& q, const cost_model::CostRecord& r);

}  // namespace kvshift::reports
