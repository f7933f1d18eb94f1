// Measured quality curves; see quality_curve.hpp.
#include "cost_model/quality_curve.hpp"

#include <algorithm>

#include "cost_model/units.hpp"

namespace kvshift::cost_model {
namespace {

std::string number(double v) { return format_g(v); }

}  // namespace

std::optional<InterpolatedQuality> interpolate_quality(std::vector<QualityPoint> points,
                                                       double retention) {
  if (points.empty()) return std::nullopt;
  std::sort(points.begin(), points.end(),
            [](const QualityPoint& a, const QualityPoint& b) { return a.retention < b.retention; });
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].retention == retention) {
      return InterpolatedQuality{points[i].delta_nll, "measured at ρ " + number(retention)};
    }
    if (i + 1 < points.size() && points[i].retention < retention &&
        retention < points[i + 1].retention) {
      const QualityPoint &a = points[i], &b = points[i + 1];
      const double w = (retention - a.retention) / (b.retention - a.retention);
      return InterpolatedQuality{
          a.delta_nll + w * (b.delta_nll - a.delta_nll),
          "interpolated between ρ " + number(a.retention) + " and " + number(b.retention)};
    }
  }
  return std::nullopt;
}

double delta_nll_at_context(const std::vector<ContextQuality>& points, std::int64_t context) {
  if (context <= points.front().context) return points.front().delta_nll;
  for (std::size_t i = 1; i < points.size(); ++i) {
    if (context <= points[i].context) {
      const ContextQuality &a = points[i - 1], &b = points[i];
      const double w =
          static_cast<double>(context - a.context) / static_cast<double>(b.context - a.context);
      return a.delta_nll + w * (b.delta_nll - a.delta_nll);
    }
  }
  return points.back().delta_nll;
}

}  // namespace kvshift::cost_model
