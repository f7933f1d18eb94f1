// A small log-log scatter in SVG, written by hand (no plotting dependency).
#include "testbed/testbed_chart.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace kvshift::testbed {
namespace {

constexpr double kSize = 420, kLeft = 70, kTop = 40;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct Axis {
  double lo = 0, hi = 1;  // log10 seconds
  double at(double seconds) const { return (std::log10(seconds) - lo) / (hi - lo) * kSize; }
};

}  // namespace

std::string measured_vs_predicted_svg(const std::vector<ChartPoint>& points,
                                      const std::string& title) {
  std::vector<ChartPoint> p;
  for (const auto& c : points) {
    if (c.predicted_s > 0 && c.measured_s > 0) p.push_back(c);
  }
  Axis a;
  if (!p.empty()) {
    double lo = 1e300, hi = -1e300;
    for (const auto& c : p) {
      lo = std::min({lo, c.predicted_s, c.measured_s});
      hi = std::max({hi, c.predicted_s, c.measured_s});
    }
    a.lo = std::floor(std::log10(lo));
    a.hi = std::max(a.lo + 1, std::ceil(std::log10(hi)));
  }
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"520\" "
       "font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"14\">" << title << "</text>\n"
    << "<g transform=\"translate(" << kLeft << "," << kTop << ")\">\n"
    << "<rect width=\"" << kSize << "\" height=\"" << kSize
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int e = static_cast<int>(a.lo); e <= static_cast<int>(a.hi); ++e) {
    const double x = a.at(std::pow(10.0, e));
    s << "<line x1=\"" << x << "\" y1=\"0\" x2=\"" << x << "\" y2=\"" << kSize
      << "\" stroke=\"#eee\"/><line x1=\"0\" y1=\"" << kSize - x << "\" x2=\"" << kSize
      << "\" y2=\"" << kSize - x << "\" stroke=\"#eee\"/>\n"
      << "<text x=\"" << x << "\" y=\"" << kSize + 16 << "\" text-anchor=\"middle\">1e" << e
      << "</text><text x=\"-6\" y=\"" << kSize - x + 4 << "\" text-anchor=\"end\">1e" << e
      << "</text>\n";
  }
  for (double f : {1.0, 1.1, 1 / 1.1}) {  // y = x and the ±10 % target band
    const double d = std::log10(f) / (a.hi - a.lo) * kSize;
    s << "<line x1=\"0\" y1=\"" << kSize - d << "\" x2=\"" << kSize << "\" y2=\"" << -d
      << "\" stroke=\"" << (f == 1.0 ? "#333" : "#bbb") << "\" stroke-dasharray=\""
      << (f == 1.0 ? "none" : "4,3") << "\"/>\n";
  }
  std::map<std::string, int> colour;
  for (const auto& c : p) {
    const int i = colour.try_emplace(c.group, static_cast<int>(colour.size())).first->second;
    s << "<circle cx=\"" << a.at(c.predicted_s) << "\" cy=\"" << kSize - a.at(c.measured_s)
      << "\" r=\"3.5\" fill=\"" << kColours[i % 8] << "\" fill-opacity=\"0.8\"/>\n";
  }
  s << "<text x=\"" << kSize / 2 << "\" y=\"" << kSize + 34
    << "\" text-anchor=\"middle\">predicted (s)</text>\n"
    << "<text transform=\"translate(-48," << kSize / 2
    << ") rotate(-90)\" text-anchor=\"middle\">measured (s)</text>\n";
  int row = 0;
  for (const auto& [group, i] : colour) {
    s << "<circle cx=\"" << kSize + 20 << "\" cy=\"" << 10 + 18 * row << "\" r=\"4\" fill=\""
      << kColours[i % 8] << "\"/><text x=\"" << kSize + 30 << "\" y=\"" << 14 + 18 * row << "\">"
      << group << "</text>\n";
    ++row;
  }
  s << "</g>\n</svg>\n";
  return s.str();
}

}  // namespace kvshift::testbed
