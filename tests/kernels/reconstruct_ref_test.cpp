// CPU GEMM and RISK-KV reconstruction: a hand GEMM, an identity predictor that
// must copy the anchor's KV into the target (RoPE undone and redone), a
// bias-only predictor, and batching N requests equal to N single runs.
#include <gtest/gtest.h>

#include <random>

#include "host_tensor.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::HostTensor;

TEST(GemmRef, HandCaseTransposedAndAccumulating) {
  HostTensor a(DType::kF32, {2, 3}), bt(DType::kF32, {2, 3}), b(DType::kF32, {3, 2});
  HostTensor c(DType::kF32, {2, 2});
  const float av[] = {1, 2, 3, 4, 5, 6}, btv[] = {1, 0, 1, 0, 1, 0};
  for (int i = 0; i < 6; ++i) {
    a.set(i, av[i]);
    bt.set(i, btv[i]);
  }
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 3; ++k) b.set(k * 2 + n, bt.get(n * 3 + k));
  cpu::gemm({a.view(), bt.view(), c.view(), true, 1, 0});
  EXPECT_EQ(c.values(), (std::vector<float>{4, 2, 10, 5}));
  cpu::gemm({a.view(), b.view(), c.view(), false, 2, 1});  // c = 2ab + c
  EXPECT_EQ(c.values(), (std::vector<float>{12, 6, 30, 15}));
}

struct Cache {
  std::int64_t requests, layers, tokens, heads, hd;
  HostTensor t;
  Cache(DType dtype, std::int64_t r, std::int64_t l, std::int64_t tok, std::int64_t h,
        std::int64_t d)
      : requests(r), layers(l), tokens(tok), heads(h), hd(d), t(dtype, {r, l, 2, tok, h, d}) {}
  std::int64_t w() const { return 2 * heads * hd; }
};

ReconstructDesc make_desc(Cache& c, std::vector<int> anchors, std::vector<int> targets,
                          HostTensor& weight, HostTensor& bias, HostTensor& x, HostTensor& z) {
  ReconstructDesc d;
  d.cache = c.t.view();
  d.anchor_layers = std::move(anchors);
  d.target_layers = std::move(targets);
  d.weight = weight.view();
  d.bias = bias.view();
  d.x_workspace = x.view();
  d.z_workspace = z.view();
  d.theta = 10000.0;
  d.position_offset = 3;
  return d;
}

TEST(ReconstructRef, IdentityPredictorCopiesTheAnchorLayer) {
  std::mt19937_64 rng(5);
  Cache c(DType::kF32, 2, 3, 7, 2, 8);
  c.t.randomize(rng);
  const std::int64_t w = c.w(), rows = 2 * 7;
  HostTensor weight(DType::kF32, {w, w}), bias(DType::kF32, {w});
  HostTensor x(DType::kF32, {rows, w}), z(DType::kF32, {rows, w});
  weight.fill(0);
  bias.fill(0);
  for (std::int64_t i = 0; i < w; ++i) weight.set(i * w + i, 1);
  cpu::reconstruct(make_desc(c, {0}, {2}, weight, bias, x, z));
  for (int kv = 0; kv < 2; ++kv) {
    const TensorView s = cache_layer(c.t.view(), 0, kv), d = cache_layer(c.t.view(), 2, kv);
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t t = 0; t < 7; ++t)
        for (std::int64_t h = 0; h < 2; ++h)
          for (std::int64_t e = 0; e < 8; ++e)
            EXPECT_NEAR(load_float(d, d.offset({r, t, h, e})),
                        load_float(s, s.offset({r, t, h, e})), 1e-5);
  }
}

TEST(ReconstructRef, BiasOnlyPredictorWritesRotatedBiasKeysAndBiasValues) {
  std::mt19937_64 rng(6);
  Cache c(DType::kF32, 1, 2, 4, 1, 2);
  c.t.randomize(rng);
  const std::int64_t w = c.w();
  HostTensor weight(DType::kF32, {w, w}), bias(DType::kF32, {w});
  HostTensor x(DType::kF32, {4, w}), z(DType::kF32, {4, w});
  weight.fill(0);
  const float b[] = {1, 0, 0.5f, -2};  // K = (1, 0), V = (0.5, -2)
  for (int i = 0; i < 4; ++i) bias.set(i, b[i]);
  cpu::reconstruct(make_desc(c, {0}, {1}, weight, bias, x, z));
  const TensorView k = cache_layer(c.t.view(), 1, 0), v = cache_layer(c.t.view(), 1, 1);
  for (std::int64_t t = 0; t < 4; ++t) {
    EXPECT_NEAR(load_float(k, k.offset({0, t, 0, 0})), std::cos(3.0 + t), 1e-6);
    EXPECT_NEAR(load_float(k, k.offset({0, t, 0, 1})), std::sin(3.0 + t), 1e-6);
    EXPECT_EQ(load_float(v, v.offset({0, t, 0, 0})), 0.5f);
    EXPECT_EQ(load_float(v, v.offset({0, t, 0, 1})), -2.0f);
  }
}

TEST(ReconstructRef, BatchedRequestsEqualSeparateRuns) {
  std::mt19937_64 rng(9);
  const std::int64_t n = 3, tokens = 5;
  Cache batched(DType::kBF16, n, 6, tokens, 2, 4);
  batched.t.randomize(rng);
  const std::int64_t w = batched.w();
  HostTensor weight(DType::kBF16, {4 * w, 2 * w}), bias(DType::kF32, {2 * w});
  weight.randomize(rng, 0.1f);
  bias.randomize(rng);
  std::vector<Cache> singles;
  for (std::int64_t r = 0; r < n; ++r) {
    singles.emplace_back(DType::kBF16, 1, 6, tokens, 2, 4);
    const std::int64_t per = singles.back().t.numel();
    for (std::int64_t i = 0; i < per; ++i) singles.back().t.set(i, batched.t.get(r * per + i));
  }
  HostTensor x(DType::kBF16, {n * tokens, 4 * w}), z(DType::kF32, {n * tokens, 2 * w});
  cpu::reconstruct(make_desc(batched, {0, 1, 4, 5}, {2, 3}, weight, bias, x, z));
  for (std::int64_t r = 0; r < n; ++r) {
    HostTensor x1(DType::kBF16, {tokens, 4 * w}), z1(DType::kF32, {tokens, 2 * w});
    cpu::reconstruct(make_desc(singles[r], {0, 1, 4, 5}, {2, 3}, weight, bias, x1, z1));
    const std::int64_t per = singles[r].t.numel();
    for (std::int64_t i = 0; i < per; ++i)
      ASSERT_EQ(singles[r].t.get(i), batched.t.get(r * per + i));
  }
}

TEST(ReconstructRef, Bf16GemmOutputStaysWithinBf16RoundingOfFp32) {
  std::mt19937_64 rng(12);
  Cache a(DType::kBF16, 2, 4, 9, 1, 8);
  a.t.randomize(rng);
  Cache b(DType::kBF16, 2, 4, 9, 1, 8);
  for (std::int64_t i = 0; i < a.t.numel(); ++i) b.t.set(i, a.t.get(i));
  const std::int64_t w = a.w(), rows = 18;
  HostTensor weight(DType::kBF16, {2 * w, w}), bias(DType::kF32, {w});
  weight.randomize(rng, 0.2f);
  bias.randomize(rng);
  HostTensor x(DType::kBF16, {rows, 2 * w}), z32(DType::kF32, {rows, w}),
      z16(DType::kBF16, {rows, w});
  cpu::reconstruct(make_desc(a, {0, 3}, {1}, weight, bias, x, z32));
  cpu::reconstruct(make_desc(b, {0, 3}, {1}, weight, bias, x, z16));
  const double err = testing::relative_error(b.t.values(), a.t.values());
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(testing::norm_of(a.t.values()), 0);
}

TEST(ReconstructRef, RejectsATargetThatIsAlsoAnAnchor) {
  Cache c(DType::kF32, 1, 3, 2, 1, 2);
  const std::int64_t w = c.w();
  HostTensor weight(DType::kF32, {w, w}), bias(DType::kF32, {w});
  HostTensor x(DType::kF32, {2, w}), z(DType::kF32, {2, w});
  EXPECT_THROW(cpu::reconstruct(make_desc(c, {1}, {1}, weight, bias, x, z)), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::kernels
