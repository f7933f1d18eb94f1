// CPU attention: a 3-token case computed by hand, the chunked attention and
// attention mass equal to the naive softmax in double on random GQA inputs
// (several 128-query chunks, queries after a history, bf16 in and out), a sliding
// window (Gemma 3's local layers), and the attention-mass identities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

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

void expect_chunked_equals_naive(DType dtype, std::int64_t tq, std::int64_t tk, std::int64_t hq,
                                 std::int64_t hkv, std::int64_t hd, double bound,
                                 DType out_dtype = DType::kF32) {
  std::mt19937_64 rng(tq * 131 + tk);
  HostTensor q(dtype, {tq, hq, hd}), k(dtype, {tk, hkv, hd}), v(dtype, {tk, hkv, hd});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  HostTensor o1(out_dtype, {tq, hq, hd}), o2(out_dtype, {tq, hq, hd});
  HostTensor l1(DType::kF32, {tq, hq}), l2(DType::kF32, {tq, hq});
  cpu::attention({q.view(), k.view(), v.view(), o1.view(), l1.view(), 0});
  cpu::attention_naive({q.view(), k.view(), v.view(), o2.view(), l2.view(), 0});
  std::string report;
  ASSERT_GT(testing::norm_of(o2.values()), 0);
  EXPECT_LT(testing::relative_error(o1.values(), o2.values(), &report), bound) << report;
  EXPECT_LT(testing::relative_error(l1.values(), l2.values(), &report), bound) << report;
}

TEST(AttentionRef, ChunkedAttentionEqualsNaiveSoftmax) {
  expect_chunked_equals_naive(DType::kF32, 37, 37, 6, 2, 16, 1e-5);
  expect_chunked_equals_naive(DType::kF32, 5, 53, 4, 4, 8, 1e-5);  // queries after a history
  expect_chunked_equals_naive(DType::kBF16, 19, 40, 8, 1, 32, 1e-5);
  expect_chunked_equals_naive(DType::kF32, 300, 300, 3, 1, 64, 1e-5);  // chunks 128 + 128 + 44
  expect_chunked_equals_naive(DType::kF32, 150, 200, 4, 2, 16, 1e-5);  // two chunks after a history
  expect_chunked_equals_naive(DType::kBF16, 130, 140, 2, 1, 64, 1e-2, DType::kBF16);
}

TEST(AttentionRef, ASlidingWindowShowsEachQueryOnlyItsLastKeys) {
  std::mt19937_64 rng(21);
  const std::int64_t tq = 150, tk = 200, hq = 4, hkv = 2, hd = 16, window = 37;
  HostTensor q(DType::kF32, {tq, hq, hd}), k(DType::kF32, {tk, hkv, hd}),
      v(DType::kF32, {tk, hkv, hd});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  const auto run = [&](auto op, std::int64_t w) {
    HostTensor out(DType::kF32, {tq, hq, hd}), lse(DType::kF32, {tq, hq});
    AttentionDesc d{q.view(), k.view(), v.view(), out.view(), lse.view(), 0};
    d.window = w;
    op(d);
    return std::pair{out.values(), lse.values()};
  };
  const auto [chunked, chunked_lse] = run(cpu::attention, window);
  const auto [naive, naive_lse] = run(cpu::attention_naive, window);
  std::string report;
  EXPECT_LT(testing::relative_error(chunked, naive, &report), 1e-5) << report;
  EXPECT_LT(testing::relative_error(chunked_lse, naive_lse, &report), 1e-5) << report;
  // A window as long as the keys is no window at all.
  EXPECT_EQ(run(cpu::attention, tk).first, run(cpu::attention, 0).first);
  EXPECT_NE(chunked, run(cpu::attention, 0).first);
  // The last query alone over its last `window` keys, as a problem of its own.
  HostTensor q1(DType::kF32, {1, hq, hd}), kw(DType::kF32, {window, hkv, hd}),
      vw(DType::kF32, {window, hkv, hd}), o1(DType::kF32, {1, hq, hd});
  for (std::int64_t e = 0; e < hq * hd; ++e) q1.set(e, q.get((tq - 1) * hq * hd + e));
  for (std::int64_t e = 0; e < window * hkv * hd; ++e) {
    kw.set(e, k.get((tk - window) * hkv * hd + e));
    vw.set(e, v.get((tk - window) * hkv * hd + e));
  }
  cpu::attention_naive({q1.view(), kw.view(), vw.view(), o1.view(), {}, 0});
  for (std::int64_t e = 0; e < hq * hd; ++e) {
    EXPECT_NEAR(chunked[(tq - 1) * hq * hd + e], o1.get(e), 1e-5) << e;
  }
}

TEST(AttentionRef, AWindowedMassIsZeroOutsideTheWindowAndSumsToOnePerQuery) {
  std::mt19937_64 rng(22);
  const std::int64_t tq = 140, tk = 160, hq = 2, hkv = 1, hd = 8, window = 50;
  HostTensor q(DType::kF32, {tq, hq, hd}), k(DType::kF32, {tk, hkv, hd}),
      v(DType::kF32, {tk, hkv, hd}), out(DType::kF32, {tq, hq, hd}), lse(DType::kF32, {tq, hq});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  AttentionDesc a{q.view(), k.view(), v.view(), out.view(), lse.view(), 0};
  a.window = window;
  cpu::attention(a);
  HostTensor mass(DType::kF32, {hq, tk});
  AttentionMassDesc m{q.view(), k.view(), lse.view(), mass.view(), 0, tq - 1, Reduce::kSum};
  m.window = window;
  cpu::attention_mass(m);  // the last query only: it sees keys [tk − window, tk)
  for (std::int64_t h = 0; h < hq; ++h) {
    double total = 0;
    for (std::int64_t j = 0; j < tk; ++j) {
      if (j < tk - window) {
        EXPECT_EQ(mass.get(h * tk + j), 0.0f) << j;
      }
      total += mass.get(h * tk + j);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(AttentionRef, KeyMaskDropsKeysPerHeadByHand) {
  Hand h;
  HostTensor out(DType::kF32, {3, 1, 2}), lse(DType::kF32, {3, 1}), mask(DType::kI32, {3, 1});
  const auto run = [&](std::initializer_list<int> kept) {
    int j = 0;
    for (const int m : kept) mask.seti(j++, m);
    for (const auto op : {cpu::attention, cpu::attention_naive}) {
      op({h.q.view(), h.k.view(), h.v.view(), out.view(), lse.view(), 1.0f, mask.view()});
    }
  };
  run({1, 0, 1});  // key 1 dropped: token 1 sees key 0 only; token 2 weights (1, 3)/4
  const float want[] = {1, 0, 1, 0, 1, 0.75f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out.get(i), want[i], 1e-6) << i;
  EXPECT_NEAR(lse.get(1), 0.0, 1e-6);
  EXPECT_NEAR(lse.get(2), std::log(4.0), 1e-6);
  run({0, 0, 1});  // tokens 0 and 1 see no key: 0 out, lse −inf
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.get(i), 0.0f) << i;
  EXPECT_EQ(lse.get(0), -INFINITY);
  EXPECT_EQ(lse.get(1), -INFINITY);
  EXPECT_NEAR(out.get(4), 1.0, 1e-6);
  EXPECT_NEAR(out.get(5), 1.0, 1e-6);
  EXPECT_NEAR(lse.get(2), std::log(3.0), 1e-6);
}

// Metamorphic: a masked KV head attends exactly as that head alone over only its kept keys
// (kept in order, so causality is the same), for the chunked op and the naive oracle.
TEST(AttentionRef, KeyMaskEqualsEachHeadOverItsKeptKeysOnly) {
  std::mt19937_64 rng(31);
  const std::int64_t tq = 150, tk = 400, hq = 6, hkv = 3, hd = 16, group = hq / hkv;
  HostTensor q(DType::kF32, {tq, hq, hd}), k(DType::kF32, {tk, hkv, hd}),
      v(DType::kF32, {tk, hkv, hd}), mask(DType::kI32, {tk, hkv});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  std::bernoulli_distribution coin(0.5);
  std::vector<std::vector<std::int64_t>> kept(hkv);
  for (std::int64_t j = 0; j < tk; ++j) {
    for (std::int64_t h = 0; h < hkv; ++h) {
      // Head h keeps a share that falls with h; every query's own key stays (tk − tq on).
      const bool keep = j >= tk - tq || (h == 0   ? coin(rng) || coin(rng)
                                         : h == 1 ? coin(rng)
                                                  : j % 7 == 0);
      mask.seti(j * hkv + h, keep ? 1 : 0);
      if (keep) kept[h].push_back(j);
    }
  }
  for (const auto op : {cpu::attention, cpu::attention_naive}) {
    HostTensor out(DType::kF32, {tq, hq, hd}), lse(DType::kF32, {tq, hq});
    op({q.view(), k.view(), v.view(), out.view(), lse.view(), 0, mask.view()});
    for (std::int64_t kh = 0; kh < hkv; ++kh) {
      const auto n = static_cast<std::int64_t>(kept[kh].size());
      HostTensor qh(DType::kF32, {tq, group, hd}), kc(DType::kF32, {n, 1, hd}),
          vc(DType::kF32, {n, 1, hd}), oh(DType::kF32, {tq, group, hd}),
          lh(DType::kF32, {tq, group});
      for (std::int64_t i = 0; i < tq; ++i) {
        for (std::int64_t g = 0; g < group * hd; ++g) {
          qh.set(i * group * hd + g, q.get((i * hq + kh * group) * hd + g));
        }
      }
      for (std::int64_t r = 0; r < n; ++r) {
        for (std::int64_t e = 0; e < hd; ++e) {
          kc.set(r * hd + e, k.get((kept[kh][r] * hkv + kh) * hd + e));
          vc.set(r * hd + e, v.get((kept[kh][r] * hkv + kh) * hd + e));
        }
      }
      cpu::attention_naive({qh.view(), kc.view(), vc.view(), oh.view(), lh.view(), 0});
      for (std::int64_t i = 0; i < tq; ++i) {
        for (std::int64_t g = 0; g < group; ++g) {
          EXPECT_NEAR(lse.get(i * hq + kh * group + g), lh.get(i * group + g), 1e-5);
          for (std::int64_t e = 0; e < hd; ++e) {
            ASSERT_NEAR(out.get((i * hq + kh * group + g) * hd + e),
                        oh.get((i * group + g) * hd + e), 1e-5)
                << "query " << i << " head " << kh * group + g;
          }
        }
      }
    }
  }
}

/// Σ (kSum) or max (kMax) over queries i >= begin of softmax_i(j), in double from the scores.
std::vector<double> naive_mass(const HostTensor& q, const HostTensor& k, std::int64_t h,
                               std::int64_t kh, std::int64_t begin, Reduce reduce) {
  const std::int64_t tq = q.view().shape[0], tk = k.view().shape[0], hq = q.view().shape[1];
  const std::int64_t hd = q.view().shape[2], hkv = k.view().shape[1];
  std::vector<double> mass(tk, 0.0);
  for (std::int64_t i = begin; i < tq; ++i) {
    const std::int64_t visible = tk - tq + i + 1;
    std::vector<double> p(visible);
    for (std::int64_t j = 0; j < visible; ++j) {
      double dot = 0;
      for (std::int64_t e = 0; e < hd; ++e) {
        dot += double(q.get((i * hq + h) * hd + e)) * double(k.get((j * hkv + kh) * hd + e));
      }
      p[j] = dot / std::sqrt(double(hd));
    }
    const double m = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& x : p) sum += (x = std::exp(x - m));
    for (std::int64_t j = 0; j < visible; ++j) {
      mass[j] = reduce == Reduce::kSum ? mass[j] + p[j] / sum : std::max(mass[j], p[j] / sum);
    }
  }
  return mass;
}

TEST(AttentionRef, ChunkedMassAndMaxEqualNaiveSoftmax) {
  std::mt19937_64 rng(12);
  const std::int64_t tq = 270, tk = 290, hq = 4, hkv = 2, hd = 16;
  HostTensor q(DType::kF32, {tq, hq, hd}), k(DType::kF32, {tk, hkv, hd}),
      v(DType::kF32, {tk, hkv, hd}), out(DType::kF32, {tq, hq, hd}), lse(DType::kF32, {tq, hq});
  q.randomize(rng);
  k.randomize(rng);
  v.randomize(rng);
  cpu::attention({q.view(), k.view(), v.view(), out.view(), lse.view(), 0});
  for (const std::int64_t begin : {std::int64_t{0}, std::int64_t{200}}) {
    for (const Reduce reduce : {Reduce::kSum, Reduce::kMax}) {
      HostTensor mass(DType::kF32, {hq, tk});
      cpu::attention_mass({q.view(), k.view(), lse.view(), mass.view(), 0, begin, reduce});
      std::vector<float> want;
      for (std::int64_t h = 0; h < hq; ++h) {
        for (const double w : naive_mass(q, k, h, h / (hq / hkv), begin, reduce)) {
          want.push_back(static_cast<float>(w));
        }
      }
      const std::vector<float> got = mass.values();
      std::string report;
      EXPECT_LT(testing::relative_error(got, want, &report), 1e-5)
          << "begin " << begin << (reduce == Reduce::kSum ? " sum" : " max") << "\n"
          << report;
    }
  }
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
