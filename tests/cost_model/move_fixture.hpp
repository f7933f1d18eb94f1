// The methods the move-plan tests plan with: Qwen2.5-0.5B, the paper's RISK-KV topology, ProxyKV
// at ρ 0.25, ΔNLL 0.002 (RISK-KV) and 0.03 (ProxyKV).
#pragma once

#include "cost_model/move_plan.hpp"

namespace kvshift::cost_model {

struct MoveFixture {
  ModelSpec model = find_model("qwen2.5-0.5b");
  OmissionPlan topology = OmissionPlan::parse("paper", model);
  MoveMethods methods{&model, &topology, DType::kF32, 0.25, 0.002, 0.03, {}};
};

}  // namespace kvshift::cost_model
