// The mapper's op sequence (backend/cuda/mapper_program.hpp): on the CPU twins
// it equals HybridAxialMapper::forward (where kvshift_backend is linked, i.e.
// outside the GPU-only build), and GpuMapper on the CUDA kernels equals both
// the CPU twins' run and HybridAxialMapper::forward on a small random mapper
// (skipped with the reason without a device).
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "backend/cuda/gpu_mapper.hpp"
#include "backend/cuda/mapper_program.hpp"
#include "gpu_support.hpp"
#include "kernels/cpu.hpp"
#include "random_mapper.hpp"
#ifdef KVSHIFT_TEST_HAVE_BACKEND
#include "backend/proxy_mapper.hpp"
#endif

namespace kvshift::backend::gpu {
namespace {

using kernels::Device;
using kernels::DType;
using kernels::TensorView;

// T > window, so the window and both padded ends of the stem matter.
constexpr std::int64_t kTokens = 150;
const MapperConfig kConfig{.in_channels = 37,
                           .targets = 11,
                           .width = 32,
                           .layers = 2,
                           .heads = 4,
                           .ffn = 48,
                           .kernel = 3,
                           .window = 16};

/// Features like log_mean_attention's: logs of weights, mostly in [-14, 0].
Matrix random_features(std::mt19937_64& rng) {
  return testing::random_matrix(kConfig.in_channels, kTokens, rng, -6, 3);
}

TensorView host_view(const Matrix& m) {
  return kernels::make_view(const_cast<float*>(m.data()), DType::kF32, Device::kHost,
                            {m.rows(), m.cols()});
}

/// The op sequence on the CPU twins: scores [targets, T].
Matrix run_on_cpu(const MapperWeights& weights, const Matrix& x) {
  const PreparedMapper p = prepare_mapper(weights);
  const auto w = p.tensors.map([](const HostTensor& t) {
    return view_of(t.shape, const_cast<float*>(t.values.data()), Device::kHost);
  });
  std::vector<std::vector<float>> storage;
  std::vector<TensorView> v;
  for (const auto& shape : workspace_shapes(p.config, x.cols())) {
    std::int64_t n = 1;
    for (std::int64_t s : shape) n *= s;
    v.push_back(view_of(shape, storage.emplace_back(n).data(), Device::kHost));
  }
  const MapperWorkspace ws{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  const TensorView y = run_mapper(kernels::cpu::Ops{}, p, w, ws, host_view(x));
  return Eigen::Map<const Matrix>(static_cast<const float*>(y.data), y.shape[0], y.shape[1]);
}

/// GpuMapper's scores for x (the device must be present).
Matrix run_on_gpu(const MapperWeights& weights, const Matrix& x) {
  const kernels::cuda::Context ctx;
  GpuMapper mapper(weights, x.cols() + 7, ctx);  // workspaces longer than this T
  kernels::testing::HostTensor hx(DType::kF32, {x.rows(), x.cols()});
  std::copy(x.data(), x.data() + x.size(), static_cast<float*>(hx.data()));
  const kernels::testing::DeviceTensor dx = kernels::testing::to_device(hx);
  mapper.forward(dx.view);
  const std::vector<float> y = mapper.copy_scores(x.cols());
  return Eigen::Map<const Matrix>(y.data(), kConfig.targets, x.cols());
}

double relative_error(const Matrix& got, const Matrix& want) {
  EXPECT_GT(want.norm(), 0);
  return (got - want).norm() / want.norm();
}

TEST(MapperProgram, PrepareRejectsMisshapenWeights) {
  std::mt19937_64 rng(5);
  MapperWeights w = testing::random_mapper_weights(kConfig, rng);
  w.encoder[1].up = Matrix::Zero(kConfig.ffn + 1, kConfig.width);
  EXPECT_THROW(prepare_mapper(w), std::invalid_argument);
}

TEST(GpuMapper, EqualsTheOpSequenceOnTheCpuTwins) {
  KVSHIFT_REQUIRE_GPU();
  std::mt19937_64 rng(6);
  const MapperWeights w = testing::random_mapper_weights(kConfig, rng);
  const Matrix x = random_features(rng);
  EXPECT_LE(relative_error(run_on_gpu(w, x), run_on_cpu(w, x)), 1e-5);
}

#ifdef KVSHIFT_TEST_HAVE_BACKEND
TEST(MapperProgram, OnTheCpuTwinsEqualsHybridAxialMapperForward) {
  const HybridAxialMapper m = HybridAxialMapper::random(kConfig, 7);
  std::mt19937_64 rng(8);
  const Matrix x = random_features(rng);
  EXPECT_LE(relative_error(run_on_cpu(m.weights(), x), m.forward(x)), 1e-5);
}

TEST(GpuMapper, EqualsHybridAxialMapperForward) {
  KVSHIFT_REQUIRE_GPU();
  const HybridAxialMapper m = HybridAxialMapper::random(kConfig, 9);
  std::mt19937_64 rng(10);
  const Matrix x = random_features(rng);
  EXPECT_LE(relative_error(run_on_gpu(m.weights(), x), m.forward(x)), 1e-5);
}
#endif

}  // namespace
}  // namespace kvshift::backend::gpu
