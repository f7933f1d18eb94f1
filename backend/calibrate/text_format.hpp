// Number formatting shared by the calibration and quality reports (numbers themselves go
// through kvshift::format_number).
#pragma once

#include <string>

#include "cost_model/units.hpp"

namespace kvshift::backend::calibrate {

/// A share as a percentage with one decimal ("6.7 %").
inline std::string pct(double share) { return format_number("%.1f %%", 100.0 * share); }

}  // namespace kvshift::backend::calibrate
