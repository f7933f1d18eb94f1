// CUDA vs CPU twins of the mapper ops on fresh random inputs: im2col, the
// bias/GELU/positions epilogue, LayerNorm (in place too), sliding-window
// attention at several head sizes and radii, and the head-axis cross-attention.
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "gpu_support.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

class MapperTwin : public ::testing::Test {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  HostTensor random(std::initializer_list<std::int64_t> shape, float sigma = 1) {
    HostTensor t(DType::kF32, shape);
    t.randomize(rng_, sigma);
    return t;
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

TEST_F(MapperTwin, Im2Col) {
  for (const int kernel : {1, 3, 7}) {
    const HostTensor x = random({37, 301});
    HostTensor want(DType::kF32, {301, 37 * kernel}), got(DType::kF32, {301, 37 * kernel});
    cpu::im2col({x.view(), want.view(), kernel});
    DeviceTensor dx = testing::to_device(x), dout = testing::poisoned_like(got);
    cuda::im2col({dx.view, dout.view, kernel}, nullptr);
    testing::download(dout, got);
    testing::expect_twin(got, want, "im2col");
  }
}

TEST_F(MapperTwin, BiasAct) {
  using Act = BiasActDesc::Act;
  for (const auto& [act, positions] :
       {std::pair{Act::kNone, false}, {Act::kGelu, false}, {Act::kGelu, true}}) {
    HostTensor x = random({1000, 66});
    const HostTensor bias = random({66});
    DeviceTensor dx = testing::to_device(x), db = testing::to_device(bias);
    cpu::bias_act({x.view(), bias.view(), act, positions});
    cuda::bias_act({dx.view, db.view, act, positions}, nullptr);
    HostTensor got(DType::kF32, {1000, 66});
    testing::download(dx, got);
    testing::expect_twin(got, x, "bias_act");
  }
}

TEST_F(MapperTwin, LayerNorm) {
  for (const std::int64_t dim : {64, 100, 257}) {
    const HostTensor x = random({77, dim}, 3), w = random({dim}), b = random({dim});
    HostTensor want(DType::kF32, {77, dim}), got(DType::kF32, {77, dim});
    cpu::layer_norm({x.view(), w.view(), b.view(), want.view()});
    DeviceTensor dx = testing::to_device(x), dw = testing::to_device(w), db = testing::to_device(b),
                 dout = testing::poisoned_like(got);
    cuda::layer_norm({dx.view, dw.view, db.view, dout.view}, nullptr);
    testing::download(dout, got);
    testing::expect_twin(got, want, "layer_norm");
    cuda::layer_norm({dx.view, dw.view, db.view, dx.view}, nullptr);  // in place
    testing::download(dx, got);
    testing::expect_twin(got, want, "layer_norm in place");
  }
}

TEST_F(MapperTwin, WindowAttention) {
  struct Case {
    std::int64_t tokens, heads, hd, radius;
  };
  for (const Case c :
       {Case{301, 4, 16, 64}, Case{77, 2, 48, 5}, Case{130, 3, 128, 0}, Case{40, 1, 200, 100}}) {
    const HostTensor q = random({c.tokens, c.heads, c.hd}, 0.5f),
                     k = random({c.tokens, c.heads, c.hd}, 0.5f),
                     v = random({c.tokens, c.heads, c.hd});
    HostTensor want(DType::kF32, {c.tokens, c.heads, c.hd}),
        got(DType::kF32, {c.tokens, c.heads, c.hd});
    cpu::window_attention({q.view(), k.view(), v.view(), want.view(), c.radius});
    DeviceTensor dq = testing::to_device(q), dk = testing::to_device(k), dv = testing::to_device(v),
                 dout = testing::poisoned_like(got);
    cuda::window_attention({dq.view, dk.view, dv.view, dout.view, c.radius}, nullptr);
    testing::download(dout, got);
    testing::expect_twin(got, want, "window_attention");
  }
}

TEST_F(MapperTwin, AxialHead) {
  const std::int64_t sources = 270, targets = 58, tokens = 203;
  const HostTensor x = random({sources, tokens}), g = random({targets, sources}),
                   u = random({targets}), vb = random({sources}),
                   terms = random({tokens, sources + 2});
  HostTensor want(DType::kF32, {targets, tokens}), got(DType::kF32, {targets, tokens});
  cpu::axial_head(
      {x.view(), g.view(), u.view(), vb.view(), terms.view(), want.view(), 0.7f, 0.1f, 0.125f});
  DeviceTensor dx = testing::to_device(x), dg = testing::to_device(g), du = testing::to_device(u),
               dvb = testing::to_device(vb), dt = testing::to_device(terms),
               dy = testing::poisoned_like(got);
  cuda::axial_head({dx.view, dg.view, du.view, dvb.view, dt.view, dy.view, 0.7f, 0.1f, 0.125f},
                   nullptr);
  testing::download(dy, got);
  testing::expect_twin(got, want, "axial_head");
}

}  // namespace
}  // namespace kvshift::kernels
