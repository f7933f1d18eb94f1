// A method's measured quality as a function of its retention ratio ρ: the
// (ρ, mean ΔNLL) points `kvshift quality` wrote, read between the points by
// linear interpolation. Outside the measured range there is no answer — an
// extrapolated ΔNLL would be a guess dressed as a measurement.
#pragma once

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

}  // namespace kvshift::cost_model
