// Number formatting shared by the calibration and quality reports.
#pragma once

#include <cstdio>
#include <string>

namespace kvshift::backend::calibrate {

/// printf-style formatting of one number ("%.3f").
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// A share as a percentage with one decimal ("6.7 %").
inline std::string pct(double share) { return fmt("%.1f %%", 100.0 * share); }

}  // namespace kvshift::backend::calibrate
