// RISK-KV predictors on the GPU: every topology group's folded predictor made
// resident once per profile run — the calibrated ones from
// ProfileRequest::inputs (rounded on the host to the request's predictor
// dtype), else seeded random ones drawn on the device — and the timing of
// predictor_load, the host -> device copy of the real predictors' bytes from
// pinned memory (the rounding happens before, untimed).
#pragma once

#include <vector>

#include "backend/profiler.hpp"
#include "kernels/cuda.hpp"

namespace kvshift::backend::gpu {

/// The kernels' dtype for a predictor dtype of the cost model.
kernels::DType kernel_dtype(cost_model::DType t);

/// One group's predictor on the device.
struct DevicePredictor {
  std::vector<int> anchor_layers, target_layers;
  kernels::cuda::DeviceBuffer weight;  ///< [|A|·w, |T|·w] in the predictor dtype
  kernels::cuda::DeviceBuffer bias;    ///< [|T|·w] f32
};

/// Every group of `req.omission`, in order; the weights are enqueued on `stream` (random) or
/// copied synchronously (real). InputError when real predictors do not match the topology.
std::vector<DevicePredictor> device_predictors(const ProfileRequest& req, CUstream_st* stream);

/// One "predictor_load" row (tokens = 1): copying req.inputs.predictors to the device.
/// Requires real predictors.
OpTiming time_predictor_load(const ProfileRequest& req, CUstream_st* stream);

}  // namespace kvshift::backend::gpu
