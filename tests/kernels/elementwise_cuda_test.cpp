// CUDA vs CPU twins of RMSNorm, RoPE, the fused epilogue, SwiGLU, embedding
// and the seeded fill, on fresh random inputs at sizes that are not multiples
// of any tile, into NaN-poisoned outputs.
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "gpu_support.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

class ElementwiseTwin : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

TEST_P(ElementwiseTwin, RmsNorm) {
  HostTensor x(DType::kF32, {37, 1000}), w(DType::kF32, {1000});
  HostTensor out(GetParam(), {37, 1000}), got(GetParam(), {37, 1000});
  x.randomize(rng_);
  w.randomize(rng_);
  cpu::rms_norm({x.view(), w.view(), out.view(), 1e-6f});
  DeviceTensor dx = testing::to_device(x), dw = testing::to_device(w),
               dout = testing::poisoned_like(got);
  cuda::rms_norm({dx.view, dw.view, dout.view, 1e-6f}, nullptr);
  testing::download(dout, got);
  testing::expect_twin(got, out, "rms_norm");
}

TEST_P(ElementwiseTwin, RopeApplyAndInvert) {
  for (bool inverse : {false, true}) {
    HostTensor x(GetParam(), {45, 3, 64}), out(GetParam(), {45, 3, 64}),
        got(GetParam(), {45, 3, 64});
    x.randomize(rng_);
    cpu::rope({x.view(), out.view(), 1e6, 31000, inverse});
    DeviceTensor dx = testing::to_device(x), dout = testing::poisoned_like(got);
    cuda::rope({dx.view, dout.view, 1e6, 31000, inverse}, nullptr);
    testing::download(dout, got);
    testing::expect_twin(got, out, inverse ? "rope invert" : "rope apply");
  }
}

TEST_P(ElementwiseTwin, BiasRopeScatterEpilogue) {
  // z columns: Q (3 heads) | K (1 head) | V (1 head), head_dim 64, 2 requests x 33 tokens.
  const DType t = GetParam();
  HostTensor z(DType::kF32, {66, 320}), bias(DType::kF32, {320});
  z.randomize(rng_);
  bias.randomize(rng_);
  HostTensor q(t, {2, 33, 3, 64}), k(t, {2, 33, 1, 64}), v(t, {2, 33, 1, 64});
  HostTensor gq(t, {2, 33, 3, 64}), gk(t, {2, 33, 1, 64}), gv(t, {2, 33, 1, 64});
  cpu::bias_rope_scatter({z.view(),
                          bias.view(),
                          {{0, true, q.view()}, {192, true, k.view()}, {256, false, v.view()}},
                          1e4,
                          7});
  DeviceTensor dz = testing::to_device(z), db = testing::to_device(bias);
  DeviceTensor dq = testing::poisoned_like(gq), dk = testing::poisoned_like(gk),
               dv = testing::poisoned_like(gv);
  cuda::bias_rope_scatter(
      {dz.view, db.view, {{0, true, dq.view}, {192, true, dk.view}, {256, false, dv.view}}, 1e4, 7},
      nullptr);
  testing::download(dq, gq);
  testing::download(dk, gk);
  testing::download(dv, gv);
  testing::expect_twin(gq, q, "epilogue q");
  testing::expect_twin(gk, k, "epilogue k");
  testing::expect_twin(gv, v, "epilogue v");
}

TEST_P(ElementwiseTwin, Swiglu) {
  HostTensor g(GetParam(), {19, 777}), u(GetParam(), {19, 777});
  HostTensor out(GetParam(), {19, 777}), got(GetParam(), {19, 777});
  g.randomize(rng_);
  u.randomize(rng_);
  cpu::swiglu({g.view(), u.view(), out.view()});
  DeviceTensor dg = testing::to_device(g), du = testing::to_device(u),
               dout = testing::poisoned_like(got);
  cuda::swiglu({dg.view, du.view, dout.view}, nullptr);
  testing::download(dout, got);
  testing::expect_twin(got, out, "swiglu");
}

TEST_P(ElementwiseTwin, Embed) {
  HostTensor table(GetParam(), {50, 100}), ids(DType::kI32, {17});
  HostTensor out(DType::kF32, {17, 100}), got(DType::kF32, {17, 100});
  table.randomize(rng_);
  std::uniform_int_distribution<int> pick(0, 49);
  for (int i = 0; i < 17; ++i) ids.seti(i, pick(rng_));
  cpu::embed({table.view(), ids.view(), out.view()});
  DeviceTensor dt = testing::to_device(table), di = testing::to_device(ids),
               dout = testing::poisoned_like(got);
  cuda::embed({dt.view, di.view, dout.view}, nullptr);
  testing::download(dout, got);
  testing::expect_twin(got, out, "embed");
}

TEST_P(ElementwiseTwin, FillUniform) {
  const std::uint64_t seed = rng_();
  HostTensor out(GetParam(), {10001}), got(GetParam(), {10001});
  cpu::fill_uniform({out.view(), seed, -0.25f, 0.75f});
  DeviceTensor dout = testing::poisoned_like(got);
  cuda::fill_uniform({dout.view, seed, -0.25f, 0.75f}, nullptr);
  testing::download(dout, got);
  testing::expect_twin(got, out, "fill_uniform");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ElementwiseTwin, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

}  // namespace
}  // namespace kvshift::kernels
