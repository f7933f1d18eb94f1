// CPU twins of the mapper ops on cases computed by hand: im2col with its zero
// padding, bias + GELU + sinusoidal positions, LayerNorm, sliding-window
// attention, and the head-axis cross-attention.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu.hpp"
#include "ref_support.hpp"

namespace kvshift::kernels {
namespace {

using testing::expect_values;
using testing::filled;
using testing::HostTensor;

TEST(Im2ColRef, ShiftsEachChannelWithZerosOutside) {
  const HostTensor x = filled({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor cols(DType::kF32, {3, 6});
  cpu::im2col({x.view(), cols.view(), 3});
  expect_values(cols, {0, 1, 2, 0, 4, 5,  //
                       1, 2, 3, 4, 5, 6,  //
                       2, 3, 0, 5, 6, 0});
}

TEST(BiasActRef, AddsBiasThenGeluThenPositions) {
  HostTensor x = filled({2, 4}, {0, 1, -1, 2, 0, 0, 0, 0});
  const HostTensor bias = filled({4}, {0, 0, 0, -2});
  cpu::bias_act({x.view(), bias.view(), BiasActDesc::Act::kGelu, false});
  // gelu(0) = 0, gelu(±1) = ±Φ(±1), gelu(-2) = -2·Φ(-2)
  expect_values(x, {0, 0.8413447, -0.1586553, 0, 0, 0, 0, -0.0455003});
  HostTensor p = filled({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
  const HostTensor zero = filled({4}, {0, 0, 0, 0});
  cpu::bias_act({p.view(), zero.view(), BiasActDesc::Act::kNone, true});
  // row t, column 2m: sin(t / 10000^(2m/4)); column 2m + 1: its cos
  expect_values(p, {0, 1, 0, 1, std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)});
}

TEST(LayerNormRef, NormalisesEachRowWithTheBiasedVariance) {
  const HostTensor x = filled({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  const HostTensor w = filled({4}, {1, 2, 1, 1}), b = filled({4}, {0, 0, 1, 0});
  HostTensor out(DType::kF32, {2, 4});
  cpu::layer_norm({x.view(), w.view(), b.view(), out.view(), 1e-12f});
  const double s = 1 / std::sqrt(1.25);  // variance of 1..4 is 1.25
  expect_values(out, {-1.5 * s, -1.0 * s, 0.5 * s + 1, 1.5 * s, 0, 0, 1, 0}, 1e-5);
}

// Three tokens, one head, head_dim 1, scale 1: q = 1, k = (0, ln2, 0), v = (3, 6, 9).
TEST(WindowAttentionRef, EachQuerySeesOnlyKeysWithinTheRadius) {
  const HostTensor q = filled({3, 1, 1}, {1, 1, 1});
  const HostTensor k = filled({3, 1, 1}, {0, std::log(2.0f), 0});
  const HostTensor v = filled({3, 1, 1}, {3, 6, 9});
  HostTensor out(DType::kF32, {3, 1, 1});
  cpu::window_attention({q.view(), k.view(), v.view(), out.view(), 1, 1});
  // t0: keys 0, 1 -> (1/3, 2/3); t1: keys 0..2 -> (1/4, 1/2, 1/4); t2: keys 1, 2 -> (2/3, 1/3)
  expect_values(out, {5, 6, 7}, 1e-5);
  cpu::window_attention({q.view(), k.view(), v.view(), out.view(), 0, 1});
  expect_values(out, {3, 6, 9});
  cpu::window_attention({q.view(), k.view(), v.view(), out.view(), 5, 1});  // not causal
  expect_values(out, {6, 6, 6}, 1e-5);
}

// Two sources, one target, two times.
TEST(AxialHeadRef, SoftmaxOverSourcesOfTheFactoredLogits) {
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f);
  const HostTensor x = filled({2, 2}, {0, 1, 0, 0});  // x[source, t]
  const HostTensor g = filled({1, 2}, {0, ln3});
  const HostTensor u = filled({1}, {ln2});
  const HostTensor vb = filled({2}, {4, 8});
  // t0: s = (0, 0), c = 0, ve = 0.5; t1: s = (0, 0), c = ln3 - ln2, ve = 1
  const HostTensor terms = filled({2, 4}, {0, 0, 0, 0.5f, 0, 0, ln3 - ln2, 1});
  HostTensor y(DType::kF32, {1, 2});
  cpu::axial_head({x.view(), g.view(), u.view(), vb.view(), terms.view(), y.view(), 2, 0.25f, 1});
  // t0: logits (0, ln3) -> (1/4, 3/4) of values (4, 8) = 7, + 0.5 + 0.25
  // t1: logits (ln2 + ln3 - ln2, ln3) -> (1/2, 1/2) of values (4 + 2, 8) = 7, + 1 + 0.25
  expect_values(y, {7.75, 8.25}, 1e-5);
}

}  // namespace
}  // namespace kvshift::kernels
