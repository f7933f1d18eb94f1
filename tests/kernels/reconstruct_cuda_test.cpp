// CUDA vs CPU twins of the RISK-KV anchor gather and reconstruction (bf16 and
// fp32 predictors, N requests batched), and the CUDA Graph replay of a
// two-group topology equal to the plain launches and to the CPU twin.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

#include "gpu_support.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

constexpr std::int64_t kReq = 3, kLayers = 8, kTokens = 21, kHeads = 2, kHd = 64;
constexpr std::int64_t kW = 2 * kHeads * kHd, kRows = kReq * kTokens;

class ReconstructTwin : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

struct Group {
  HostTensor weight, bias;
  std::vector<int> anchors, targets;
};

Group random_group(DType wtype, std::vector<int> anchors, std::vector<int> targets,
                   std::mt19937_64& rng) {
  Group g{HostTensor(wtype, {static_cast<std::int64_t>(anchors.size()) * kW, 2 * kW}),
          HostTensor(DType::kF32, {2 * kW}), std::move(anchors), std::move(targets)};
  g.weight.randomize(rng, 0.05f);
  g.bias.randomize(rng);
  return g;
}

ReconstructDesc desc(const TensorView& cache, const Group& g, const TensorView& weight,
                     const TensorView& bias, const TensorView& x, const TensorView& z) {
  return {cache, g.anchors, g.targets, weight, bias, x, z, 1e6, 5};
}

TEST_P(ReconstructTwin, AnchorGather) {
  HostTensor cache(DType::kBF16, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  cache.randomize(rng_);
  HostTensor x(GetParam(), {kRows, 4 * kW}), got(GetParam(), {kRows, 4 * kW});
  cpu::anchor_gather({cache.view(), {0, 1, 4, 5}, x.view(), 1e6, 5});
  DeviceTensor dc = testing::to_device(cache), dx = testing::poisoned_like(got);
  cuda::anchor_gather({dc.view, {0, 1, 4, 5}, dx.view, 1e6, 5}, nullptr);
  testing::download(dx, got);
  testing::expect_twin(got, x, "anchor_gather");
}

TEST_P(ReconstructTwin, WholeReconstructionIntoTheCache) {
  const DType wtype = GetParam();
  const DType ctype = wtype == DType::kF32 ? DType::kF32 : DType::kBF16;
  HostTensor cache(ctype, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  cache.randomize(rng_);
  Group g = random_group(wtype, {0, 1, 4, 5}, {2, 3}, rng_);
  // Upload a copy whose target layers are NaN: the reconstruction must overwrite all of them.
  HostTensor poisoned(ctype, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  for (std::int64_t i = 0; i < cache.numel(); ++i) poisoned.set(i, cache.get(i));
  for (int layer : g.targets) {
    for (int kv = 0; kv < 2; ++kv) {
      const TensorView l = cache_layer(poisoned.view(), layer, kv);
      for (std::int64_t r = 0; r < kReq; ++r)
        for (std::int64_t t = 0; t < kTokens; ++t)
          for (std::int64_t h = 0; h < kHeads; ++h)
            for (std::int64_t e = 0; e < kHd; ++e) store_float(l, l.offset({r, t, h, e}), NAN);
    }
  }
  DeviceTensor dcache = testing::to_device(poisoned), dw = testing::to_device(g.weight);
  DeviceTensor db = testing::to_device(g.bias);
  HostTensor x(wtype, {kRows, 4 * kW}), z(DType::kF32, {kRows, 2 * kW});
  cpu::reconstruct(desc(cache.view(), g, g.weight.view(), g.bias.view(), x.view(), z.view()));
  DeviceTensor dx = testing::poisoned_like(x), dz = testing::poisoned_like(z);
  cuda::Context ctx;
  cuda::reconstruct(desc(dcache.view, g, dw.view, db.view, dx.view, dz.view), ctx);
  HostTensor got(ctype, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  testing::download(dcache, got);
  testing::expect_twin(got, cache, "reconstruct cache");
}

TEST_P(ReconstructTwin, GraphReplayOfTwoGroupsEqualsLaunchesAndCpu) {
  const DType wtype = GetParam();
  HostTensor cache(DType::kBF16, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  cache.randomize(rng_);
  Group g1 = random_group(wtype, {0, 1, 6, 7}, {2, 3}, rng_);
  Group g2 = random_group(wtype, {0, 1, 6, 7}, {4, 5}, rng_);
  // A bf16 predictor writes its GEMM output in bf16 here (the profiler's setting).
  HostTensor x(wtype, {kRows, 4 * kW}),
      z(wtype == DType::kBF16 ? DType::kBF16 : DType::kF32, {kRows, 2 * kW});
  HostTensor want(DType::kBF16, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  for (std::int64_t i = 0; i < cache.numel(); ++i) want.set(i, cache.get(i));
  cpu::reconstruct(desc(want.view(), g1, g1.weight.view(), g1.bias.view(), x.view(), z.view()));
  cpu::reconstruct(desc(want.view(), g2, g2.weight.view(), g2.bias.view(), x.view(), z.view()));

  cuda::Stream stream;
  cuda::Context ctx(stream.get());
  DeviceTensor w1 = testing::to_device(g1.weight), b1 = testing::to_device(g1.bias);
  DeviceTensor w2 = testing::to_device(g2.weight), b2 = testing::to_device(g2.bias);
  DeviceTensor dx = testing::poisoned_like(x), dz = testing::poisoned_like(z);
  for (bool use_graph : {false, true}) {
    DeviceTensor dcache = testing::to_device(cache);
    cuda::ReconstructGraph run({desc(dcache.view, g1, w1.view, b1.view, dx.view, dz.view),
                                desc(dcache.view, g2, w2.view, b2.view, dx.view, dz.view)},
                               ctx, use_graph);
    EXPECT_EQ(run.uses_graph(), use_graph);
    run.launch();
    run.launch();  // idempotent: anchors are never targets
    ctx.synchronize();
    HostTensor got(DType::kBF16, {kReq, kLayers, 2, kTokens, kHeads, kHd});
    testing::download(dcache, got);
    testing::expect_twin(got, want, use_graph ? "graph replay" : "plain launches");
  }
}

INSTANTIATE_TEST_SUITE_P(PredictorDtypes, ReconstructTwin,
                         ::testing::Values(DType::kF32, DType::kBF16), [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

}  // namespace
}  // namespace kvshift::kernels
