// Device predictors and predictor_load timing (see gpu_predictors.hpp).
#include "backend/cuda/gpu_predictors.hpp"

#include <cuda_runtime.h>

#include <memory>

#include "backend/cuda/host_upload.hpp"
#include "backend/cuda/timing.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/input_error.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::backend::gpu {
namespace {

using kernels::DType;
namespace kc = kernels::cuda;

/// Throws unless the real predictor `p` is the one `g` needs, at the spec's KV width.
void check_predictor(const GroupPredictor& p, const cost_model::GroupPlan& g, std::int64_t w) {
  const std::string what = "predictors: group " + std::to_string(g.group);
  if (p.anchor_layers != g.anchor_layers || p.target_layers != g.target_layers)
    throw InputError(what + " has other anchor or target layers than the topology");
  const auto a = static_cast<std::int64_t>(p.anchor_layers.size()) * w;
  const auto t = static_cast<std::int64_t>(p.target_layers.size()) * w;
  if (p.weight.rows() != a || p.weight.cols() != t || p.bias.size() != t) {
    throw InputError(what + ": weight [" + std::to_string(p.weight.rows()) + ", " +
                     std::to_string(p.weight.cols()) + "] and bias [" +
                     std::to_string(p.bias.size()) + "], expected [" + std::to_string(a) + ", " +
                     std::to_string(t) + "] and [" + std::to_string(t) + "]");
  }
}

const std::vector<GroupPredictor>& real_predictors(const ProfileRequest& req) {
  const auto& all = *req.inputs.predictors;
  const auto& groups = req.omission.groups();
  if (all.size() != groups.size()) {
    throw InputError("predictors: " + std::to_string(all.size()) + " groups, the topology has " +
                     std::to_string(groups.size()));
  }
  for (std::size_t i = 0; i < groups.size(); ++i)
    check_predictor(all[i], groups[i], req.model.kv_width());
  return all;
}

std::span<const float> values(const auto& m) {
  return {m.data(), static_cast<std::size_t>(m.size())};
}

kc::DeviceBuffer random_device(DType dtype, std::int64_t count, float bound, std::uint64_t seed,
                               CUstream_st* stream) {
  kc::DeviceBuffer b(static_cast<std::size_t>(count) * kernels::dtype_size(dtype));
  kc::fill_uniform({b.view(dtype, {count}), seed, -bound, bound}, stream);
  return b;
}

}  // namespace

DType kernel_dtype(cost_model::DType t) {
  switch (t) {
    case cost_model::DType::kF32:
      return DType::kF32;
    case cost_model::DType::kF16:
      return DType::kF16;
    case cost_model::DType::kBF16:
      return DType::kBF16;
  }
  return DType::kF32;
}

std::vector<DevicePredictor> device_predictors(const ProfileRequest& req, CUstream_st* stream) {
  const DType wtype = kernel_dtype(req.predictor_dtype);
  const std::int64_t w = req.model.kv_width();
  std::vector<DevicePredictor> out;
  const auto& groups = req.omission.groups();
  const std::vector<GroupPredictor>* real = req.inputs.predictors ? &real_predictors(req) : nullptr;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const cost_model::GroupPlan& g = groups[i];
    DevicePredictor p{g.anchor_layers, g.target_layers, {}, {}};
    if (real) {
      p.weight = upload_as(wtype, {values((*real)[i].weight)});
      p.bias = upload_as(DType::kF32, {values((*real)[i].bias)});
    } else {
      const auto a = static_cast<std::int64_t>(g.anchor_layers.size()) * w;
      const auto t = static_cast<std::int64_t>(g.target_layers.size()) * w;
      p.weight = random_device(wtype, a * t, 0.02f, req.seed + 100 + g.group, stream);
      p.bias = random_device(DType::kF32, t, 0.1f, req.seed + 200 + g.group, stream);
    }
    out.push_back(std::move(p));
  }
  return out;
}

OpTiming time_predictor_load(const ProfileRequest& req, CUstream_st* stream) {
  if (!req.inputs.predictors) throw std::logic_error("predictor_load: needs real predictors");
  const DType wtype = kernel_dtype(req.predictor_dtype);
  // Staged in pinned memory in the device dtypes, with their destinations, before timing.
  std::vector<std::unique_ptr<PinnedBuffer>> host;
  std::vector<kc::DeviceBuffer> device;
  for (const GroupPredictor& p : real_predictors(req)) {
    host.push_back(std::make_unique<PinnedBuffer>(to_device_bytes(wtype, values(p.weight))));
    host.push_back(std::make_unique<PinnedBuffer>(to_device_bytes(DType::kF32, values(p.bias))));
  }
  for (const auto& h : host) device.emplace_back(h->bytes());
  return time_on_stream("predictor_load", 1, 1, req.warmup, req.repeats, stream, [&] {
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (host[i]->bytes() == 0) continue;
      KVSHIFT_CUDA_CHECK(cudaMemcpyAsync(device[i].data(), host[i]->data(), host[i]->bytes(),
                                         cudaMemcpyHostToDevice, stream));
    }
  });
}

}  // namespace kvshift::backend::gpu
