// testbed.svg / probe.svg: measured against predicted seconds, one point per
// move (or transfer), log-log, the y = x line and ±10 % bands drawn, points
// coloured by group (strategy, or flow count). A self-contained SVG: it opens
// in any browser, next to the CSV it was drawn from.
#pragma once

#include <string>
#include <vector>

namespace kvshift::testbed {

struct ChartPoint {
  double predicted_s = 0, measured_s = 0;
  std::string group;
};

/// The SVG text; points with a non-positive value are left out (log axes).
std::string measured_vs_predicted_svg(const std::vector<ChartPoint>& points,
                                      const std::string& title);

}  // namespace kvshift::testbed
