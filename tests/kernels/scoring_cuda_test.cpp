// CUDA vs CPU twins of the pruning score ops on fresh random inputs: the
// attention max (KVZip), the GQA group reduction (sum and max), SnapKV's
// pooling and log_mean_attention, at sizes that are not multiples of a tile.
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

class ScoringTwin : public ::testing::Test {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

TEST_F(ScoringTwin, AttentionMax) {
  struct Case {
    DType dtype;
    std::int64_t tq, tk, hq, hkv, hd, begin;
  };
  for (const Case c :
       {Case{DType::kF32, 77, 77, 6, 2, 64, 0}, Case{DType::kF32, 13, 100, 4, 4, 128, 5},
        Case{DType::kBF16, 301, 301, 14, 2, 64, 0}, Case{DType::kBF16, 50, 333, 12, 2, 128, 17}}) {
    HostTensor q(c.dtype, {c.tq, c.hq, c.hd}), k(c.dtype, {c.tk, c.hkv, c.hd}),
        v(c.dtype, {c.tk, c.hkv, c.hd});
    q.randomize(rng_);
    k.randomize(rng_);
    v.randomize(rng_);
    HostTensor out(c.dtype, {c.tq, c.hq, c.hd}), lse(DType::kF32, {c.tq, c.hq});
    cpu::attention({q.view(), k.view(), v.view(), out.view(), lse.view(), 0});
    HostTensor want(DType::kF32, {c.hq, c.tk}), got(DType::kF32, {c.hq, c.tk});
    cpu::attention_mass({q.view(), k.view(), lse.view(), want.view(), 0, c.begin, Reduce::kMax});
    DeviceTensor dq = testing::to_device(q), dk = testing::to_device(k),
                 dlse = testing::to_device(lse), dout = testing::poisoned_like(got);
    cuda::attention_mass({dq.view, dk.view, dlse.view, dout.view, 0, c.begin, Reduce::kMax},
                         nullptr);
    testing::download(dout, got);
    // The inputs' dtype bounds the error: bf16 scores round before the exp.
    std::string report;
    const double err = testing::relative_error(got.values(), want.values(), &report);
    EXPECT_LE(err, testing::twin_bound(c.dtype)) << "attention max: " << err << "\n" << report;
  }
}

TEST_F(ScoringTwin, GroupReduceIsBitIdentical) {
  for (const Reduce how : {Reduce::kSum, Reduce::kMax}) {
    HostTensor in(DType::kF32, {3 * 14, 1001}), want(DType::kF32, {3 * 2, 1001}),
        got(DType::kF32, {3 * 2, 1001});
    in.randomize(rng_);
    cpu::group_reduce({in.view(), want.view(), how});
    DeviceTensor din = testing::to_device(in), dout = testing::poisoned_like(got);
    cuda::group_reduce({din.view, dout.view, how}, nullptr);
    testing::download(dout, got);
    for (std::int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.get(i), want.get(i)) << i;
  }
}

TEST_F(ScoringTwin, AvgPool) {
  for (const int kernel : {1, 7, 31}) {
    HostTensor in(DType::kF32, {5, 333}), want(DType::kF32, {5, 333}), got(DType::kF32, {5, 333});
    in.randomize(rng_);
    cpu::avg_pool({in.view(), want.view(), kernel});
    DeviceTensor din = testing::to_device(in), dout = testing::poisoned_like(got);
    cuda::avg_pool({din.view, dout.view, kernel}, nullptr);
    testing::download(dout, got);
    testing::expect_twin(got, want, "avg_pool");
  }
}

TEST_F(ScoringTwin, LogMeanAttention) {
  HostTensor mass(DType::kF32, {9, 517}), want(DType::kF32, {9, 517}), got(DType::kF32, {9, 517});
  mass.randomize(rng_);
  for (std::int64_t i = 0; i < mass.numel(); ++i) mass.set(i, std::abs(mass.get(i)) * 20);
  mass.set(3, 0);  // a key nobody attends to
  cpu::log_mean_attention({mass.view(), want.view()});
  DeviceTensor dm = testing::to_device(mass), dout = testing::poisoned_like(got);
  cuda::log_mean_attention({dm.view, dout.view}, nullptr);
  testing::download(dout, got);
  testing::expect_twin(got, want, "log_mean_attention");
}

}  // namespace
}  // namespace kvshift::kernels
