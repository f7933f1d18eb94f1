// Hand-checkable cases for the CPU twins of RMSNorm (and its accumulating form),
// RoPE, SwiGLU and GeGLU, embedding, the seeded fill and the fused
// bias+RoPE+scatter epilogue (with Gemma's per-head norm).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "host_tensor.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::HostTensor;

TEST(RmsNormRef, ScalesByInverseRmsAndWeight) {
  HostTensor x(DType::kF32, {1, 2}), w(DType::kF32, {2}), out(DType::kF32, {1, 2});
  x.set(0, 3);
  x.set(1, 4);
  w.set(0, 1);
  w.set(1, 2);
  cpu::rms_norm({x.view(), w.view(), out.view(), 1e-12f});
  const float rms = std::sqrt(12.5f);
  EXPECT_NEAR(out.get(0), 3 / rms, 1e-6);
  EXPECT_NEAR(out.get(1), 8 / rms, 1e-6);
}

TEST(RmsNormRef, AccumulateAddsTheNormedRowToTheOutput) {
  HostTensor x(DType::kF32, {1, 2}), w(DType::kF32, {2}), out(DType::kF32, {1, 2});
  x.set(0, 3);
  x.set(1, 4);
  w.set(0, 1);
  w.set(1, 2);
  out.set(0, 1);
  out.set(1, -1);
  cpu::rms_norm({x.view(), w.view(), out.view(), 1e-12f, true});
  const float rms = std::sqrt(12.5f);
  EXPECT_NEAR(out.get(0), 1 + 3 / rms, 1e-6);
  EXPECT_NEAR(out.get(1), -1 + 8 / rms, 1e-6);
}

TEST(RopeRef, RotatesThePairByPositionTimesFrequency) {
  // head_dim 2: one pair with inv_freq 1, so the angle is the position itself.
  HostTensor x(DType::kF32, {3, 1, 2}), out(DType::kF32, {3, 1, 2});
  for (int t = 0; t < 3; ++t) {
    x.set(2 * t, 1);
    x.set(2 * t + 1, 0);
  }
  cpu::rope({x.view(), out.view(), 10000.0, 5, false});
  for (int t = 0; t < 3; ++t) {
    EXPECT_NEAR(out.get(2 * t), std::cos(5.0 + t), 1e-6);
    EXPECT_NEAR(out.get(2 * t + 1), std::sin(5.0 + t), 1e-6);
  }
}

TEST(RopeRef, InverseAfterApplyIsIdentityAndNormIsKept) {
  std::mt19937_64 rng(7);
  HostTensor x(DType::kF32, {37, 3, 64}), y(DType::kF32, {37, 3, 64}), z(DType::kF32, {37, 3, 64});
  x.randomize(rng);
  cpu::rope({x.view(), y.view(), 1e6, 30000, false});
  cpu::rope({y.view(), z.view(), 1e6, 30000, true});
  EXPECT_LT(testing::relative_error(z.values(), x.values()), 1e-6);
  EXPECT_NEAR(testing::norm_of(y.values()), testing::norm_of(x.values()), 1e-3);
  EXPECT_GT(testing::relative_error(y.values(), x.values()), 0.1);  // it did rotate
}

TEST(RopeRef, PositionZeroIsIdentityInPlace) {
  std::mt19937_64 rng(8);
  HostTensor x(DType::kF32, {1, 2, 8});
  x.randomize(rng);
  const auto before = x.values();
  cpu::rope({x.view(), x.view(), 10000.0, 0, false});
  EXPECT_EQ(x.values(), before);
}

TEST(SwigluRef, SiluTimesUp) {
  HostTensor g(DType::kF32, {1, 3}), u(DType::kF32, {1, 3}), out(DType::kF32, {1, 3});
  const float gv[] = {0.0f, 2.0f, -1.0f}, uv[] = {5.0f, 3.0f, -2.0f};
  for (int i = 0; i < 3; ++i) {
    g.set(i, gv[i]);
    u.set(i, uv[i]);
  }
  cpu::swiglu({g.view(), u.view(), out.view()});
  EXPECT_FLOAT_EQ(out.get(0), 0.0f);
  EXPECT_NEAR(out.get(1), 2.0f / (1 + std::exp(-2.0f)) * 3.0f, 1e-6);
  EXPECT_NEAR(out.get(2), -1.0f / (1 + std::exp(1.0f)) * -2.0f, 1e-6);
}

TEST(SwigluRef, GeluTanhTimesUp) {
  HostTensor g(DType::kF32, {1, 4}), u(DType::kF32, {1, 4}), out(DType::kF32, {1, 4});
  const float gv[] = {0.0f, 1.0f, -1.0f, 2.0f};
  for (int i = 0; i < 4; ++i) {
    g.set(i, gv[i]);
    u.set(i, 2.0f);
  }
  cpu::swiglu({g.view(), u.view(), out.view(), SwigluDesc::Act::kGeluTanh});
  // PyTorch's gelu(x, approximate="tanh") at 0, 1, -1, 2.
  const double want[] = {0.0, 0.8411919906, -0.1588080094, 1.9545976901};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out.get(i), 2 * want[i], 1e-6) << gv[i];
}

TEST(EmbedRef, CopiesRowsAndPoisonsOutOfRangeIds) {
  HostTensor table(DType::kBF16, {4, 3}), ids(DType::kI32, {3}), out(DType::kF32, {3, 3});
  for (int i = 0; i < 12; ++i) table.set(i, static_cast<float>(i));
  ids.seti(0, 2);
  ids.seti(1, 0);
  ids.seti(2, 9);
  cpu::embed({table.view(), ids.view(), out.view()});
  EXPECT_EQ(out.get(0), 6);
  EXPECT_EQ(out.get(2), 8);
  EXPECT_EQ(out.get(3), 0);
  EXPECT_TRUE(std::isnan(out.get(6)));
}

TEST(FillRef, IsSeededInRangeAndNotConstant) {
  HostTensor a(DType::kF32, {1000}), b(DType::kF32, {1000}), c(DType::kF32, {1000});
  cpu::fill_uniform({a.view(), 42, -0.5f, 0.5f});
  cpu::fill_uniform({b.view(), 42, -0.5f, 0.5f});
  cpu::fill_uniform({c.view(), 43, -0.5f, 0.5f});
  EXPECT_EQ(a.values(), b.values());
  EXPECT_NE(a.values(), c.values());
  double mean = 0;
  for (float v : a.values()) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LT(v, 0.5f);
    mean += v / 1000;
  }
  EXPECT_NEAR(mean, 0.0, 0.05);
}

TEST(EpilogueRef, AddsBiasRotatesKeysAndCopiesValues) {
  // z: [2 requests * 3 tokens, K(1 head x 4) | V(1 head x 4)]
  std::mt19937_64 rng(3);
  HostTensor z(DType::kF32, {6, 8}), bias(DType::kF32, {8});
  HostTensor k(DType::kF32, {2, 3, 1, 4}), v(DType::kBF16, {2, 3, 1, 4});
  z.randomize(rng);
  bias.randomize(rng);
  EpilogueDesc d{z.view(), bias.view(), {{0, true, k.view()}, {4, false, v.view()}}, 500.0, 2};
  cpu::bias_rope_scatter(d);
  for (int row = 0; row < 6; ++row) {
    const int t = row % 3;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(v.get(row * 4 + i),
                bf16_to_float(float_to_bf16(z.get(row * 8 + 4 + i) + bias.get(4 + i))));
    }
    for (int i = 0; i < 2; ++i) {  // pairs (0,2), (1,3); angle (2 + t) * 500^(-i/2)
      const double angle = (2 + t) * std::pow(500.0, -2.0 * i / 4);
      const float a = z.get(row * 8 + i) + bias.get(i),
                  b = z.get(row * 8 + i + 2) + bias.get(i + 2);
      EXPECT_NEAR(k.get(row * 4 + i), a * std::cos(angle) - b * std::sin(angle), 1e-5);
      EXPECT_NEAR(k.get(row * 4 + i + 2), b * std::cos(angle) + a * std::sin(angle), 1e-5);
    }
  }
}

TEST(EpilogueRef, AHeadNormScalesEachHeadByItsRmsAndWeightBeforeRope) {
  // z: one token, K as 2 heads x 2 ([3, 4] and [1, 0]), normed with weight (1, 2), then rotated
  // at position 1 (head_dim 2: one pair, angle 1).
  HostTensor z(DType::kF32, {1, 4}), norm(DType::kF32, {2}), k(DType::kF32, {1, 1, 2, 2});
  const float zv[] = {3, 4, 1, 0};
  for (int i = 0; i < 4; ++i) z.set(i, zv[i]);
  norm.set(0, 1);
  norm.set(1, 2);
  EpilogueDesc d{z.view(), {}, {{0, true, k.view(), norm.view(), 1e-12f}}, 10000.0, 1};
  cpu::bias_rope_scatter(d);
  const double c = std::cos(1.0), s = std::sin(1.0);
  const double rms0 = std::sqrt(12.5), rms1 = std::sqrt(0.5);
  const double a0 = 3 / rms0, b0 = 8 / rms0, a1 = 1 / rms1, b1 = 0;
  EXPECT_NEAR(k.get(0), a0 * c - b0 * s, 1e-5);
  EXPECT_NEAR(k.get(1), b0 * c + a0 * s, 1e-5);
  EXPECT_NEAR(k.get(2), a1 * c - b1 * s, 1e-5);
  EXPECT_NEAR(k.get(3), b1 * c + a1 * s, 1e-5);
}

}  // namespace
}  // namespace kvshift::kernels
