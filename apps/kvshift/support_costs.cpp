#include "apps/kvshift/support_costs.hpp"

#include "cost_model/input_error.hpp"

namespace kvshift::app {

std::unique_ptr<cost_model::ComputeCosts> make_compute_costs(const sim::ScenarioSpec& spec) {
  switch (spec.cost_source.kind) {
    case sim::CostSourceKind::kAnalytic:
      return std::make_unique<cost_model::RooflineCosts>(spec.gpu);
    case sim::CostSourceKind::kProfile:
      throw InputError("/cost_source: profiled cost tables are not supported by this build");
    case sim::CostSourceKind::kLive:
      throw InputError("/cost_source: live kernel runs are not supported by this build");
  }
  return nullptr;
}

}  // namespace kvshift::app
