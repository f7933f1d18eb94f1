// A method's measured quality as a function of its retention ratio ρ: the
// (ρ, mean ΔNLL) points `kvshift quality` wrote, read between the points by
// linear interpolation. Outside the measured range there is no answer — an
// extrapolated ΔNLL would be a guess dressed as a measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvshift::cost_model {

struct QualityPoint {
  double retention = 0.0;  ///< ρ
  double delta_nll = 0.0;  ///< mean ΔNLL at ρ (nats/token)
};

/// The interpolated ΔNLL at `retention`, with how it was obtained.
struct InterpolatedQuality {
  double delta_nll = 0.0;
  std::string how;  ///< "measured at ρ 0.5" or "interpolated between ρ 0.3 and 0.5"
};

/// ΔNLL at `retention` from `points` (any order, distinct ρ); nullopt outside [min ρ, max ρ]
/// or when there are no points.
std::optional<InterpolatedQuality> interpolate_quality(std::vector<QualityPoint> points,
                                                       double retention);

/// A method's ΔNLL measured at several context lengths (the history each quality file ran
/// at): a move is charged at its own context, linearly between the measured contexts and
/// at the nearest one outside them (the source says which contexts were measured).
struct ContextQuality {
  std::int64_t context = 0;
  double delta_nll = 0.0;
};

/// ΔNLL at `context` from `points` (sorted by context, distinct; not empty).
double delta_nll_at_context(const std::vector<ContextQuality>& points, std::int64_t context);

}  // namespace kvshift::cost_model
