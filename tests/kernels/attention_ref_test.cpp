// CPU attention twins: a 3-token case computed by hand, online softmax equal
// to the naive softmax on random GQA inputs, and the attention-mass identities.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "host_tensor.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::HostTensor;

struct Hand {
  HostTensor q{DType::kF32, {3, 1, 2}}, k{DType::kF32, {3, 1, 2}}, v{DType::kF32, {3, 1, 2}};
  Hand() {
    // keys (0,0), (1,0), (0,1); values (1,0), (0,1), (1,1)
    const float kv[] = {0, 0, 1, 0, 0, 1}, vv[] = {1, 0, 0, 1, 1, 1};
    // queries: q1 . k = (0, ln3), q2 . k = (0, ln2, ln3)
    const float qv[] = {0.3f, -0.2f, std::log(3.0f), 0, std::log(2.0f), std::log(3.0f)};
    for (int i = 0; i < 6; ++i) {
      k.set(i, kv[i]);
      v.set(i, vv[i]);
      q.set(i, qv[i]);
    }
  }
};

TEST(AttentionRef, ThreeTokenCaseByHand) {
  Hand h;
  HostTensor out(DType::kF32, {3, 1, 2}), lse(DType::kF32, {3, 1});
  cpu::attention({h.q.view(), h.k.view(), h.v.view(), out.view(), lse.view(), 1.0f});
  // token 0 sees only key 0; token 1: weights (1, 3)/4; token 2: weights (1, 2, 3)/6.
  const float want[] = {1, 0, 0.25f, 0.75f, (1 + 3) / 6.0f, (2 + 3) / 6.0f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out.get(i), want[i], 1e-6) << i;
  EXPECT_NEAR(lse.get(0), 0.0, 1e-6);
  EXPECT_NEAR(lse.get(1), std::log(4.0), 1e-6);
  EXPECT_NEAR(lse.get(2), std::log(6.0), 1e-6);
}

TEST(AttentionRef, MassOfTheHandCase) {
  Hand h;
  HostTensor out(DType::kF32, {3, 1, 2}), lse(DType::kF32, {3, 1}), mass(DType::kF32, {1, 3});
  cpu::attention({h.q.view(), h.k.view(), h.v.view(), out.view(), lse.view(), 1.0f});
  cpu::attention_mass({h.q.view(), h.k.view(), lse.view(), mass.view(), 1.0f, 0});
  EXPECT_NEAR(mass.get(0), 1 + 0.25 + 1 / 6.0, 1e-6);
  EXPECT_NEAR(mass.get(1), 0.75 + 2 / 6.0, 1e-6);
  EXPECT_NEAR(mass.get(2), 0.5, 1e-6);
  cpu::attention_mass(
      {h.q.view(), h.k.view(), lse.view(), mass.view(), 1.0f, 2});  // last query only
  EXPECT_NEAR(mass.get(0), 1 / 6.0, 1e-6);
  EXPECT_NEAR(mass.get(2), 0.5, 1e-6);
}

void expect_online_equals_naive(DType dtype, std::int64_t tq, std::int64_t tk, std::int64_t hq,
                                std::int64_t hkv, std::int64_t hd, double bound) {
  std::mt19937_64 rng(tq * 131 + tk);
  HostTensor q(dtype, {tq, hq, hd}), k(dtype, {tk, hkv, hd}), v(dtype, {tk, hkv, hd});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  HostTensor o1(DType::kF32, {tq, hq, hd}), o2(DType::kF32, {tq, hq, hd});
  HostTensor l1(DType::kF32, {tq, hq}), l2(DType::kF32, {tq, hq});
  cpu::attention({q.view(), k.view(), v.view(), o1.view(), l1.view(), 0});
  cpu::attention_naive({q.view(), k.view(), v.view(), o2.view(), l2.view(), 0});
  std::string report;
  ASSERT_GT(testing::norm_of(o2.values()), 0);
  EXPECT_LT(testing::relative_error(o1.values(), o2.values(), &report), bound) << report;
  EXPECT_LT(testing::relative_error(l1.values(), l2.values(), &report), bound) << report;
}

TEST(AttentionRef, OnlineSoftmaxEqualsNaiveSoftmax) {
  expect_online_equals_naive(DType::kF32, 37, 37, 6, 2, 16, 1e-5);
  expect_online_equals_naive(DType::kF32, 5, 53, 4, 4, 8, 1e-5);  // queries after a history
  expect_online_equals_naive(DType::kBF16, 19, 40, 8, 1, 32, 1e-5);
}

TEST(AttentionRef, MassOfEveryQueryRowSumsToOne) {
  std::mt19937_64 rng(11);
  const std::int64_t tq = 21, tk = 29, hq = 4, hkv = 2, hd = 8;
  HostTensor q(DType::kF32, {tq, hq, hd}), k(DType::kF32, {tk, hkv, hd}),
      v(DType::kF32, {tk, hkv, hd});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  HostTensor out(DType::kF32, {tq, hq, hd}), lse(DType::kF32, {tq, hq}),
      mass(DType::kF32, {hq, tk});
  cpu::attention({q.view(), k.view(), v.view(), out.view(), lse.view(), 0});
  cpu::attention_mass({q.view(), k.view(), lse.view(), mass.view(), 0, 4});
  for (std::int64_t h = 0; h < hq; ++h) {
    double total = 0;
    for (std::int64_t j = 0; j < tk; ++j) {
      EXPECT_GE(mass.get(h * tk + j), 0);
      total += mass.get(h * tk + j);
    }
    EXPECT_NEAR(total, tq - 4, 1e-4);
    // Keys after the first voting query's horizon get votes only from later queries.
    EXPECT_GT(mass.get(h * tk + tk - 1), 0);
  }
}

}  // namespace
}  // namespace kvshift::kernels
