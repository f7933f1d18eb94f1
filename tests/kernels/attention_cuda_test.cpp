// CUDA vs CPU twins of causal GQA attention (with log-sum-exp) and of the
// attention-mass reduction, for head_dim 64 and 128, queries over a longer
// history, and token counts that are not multiples of the 16/32 tiles.
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "gpu_support.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

struct AttnCase {
  DType dtype;
  std::int64_t tq, tk, hq, hkv, hd;
};

class AttentionTwin : public ::testing::TestWithParam<AttnCase> {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

TEST_P(AttentionTwin, OutputAndLogSumExp) {
  const AttnCase c = GetParam();
  HostTensor q(c.dtype, {c.tq, c.hq, c.hd}), k(c.dtype, {c.tk, c.hkv, c.hd}),
      v(c.dtype, {c.tk, c.hkv, c.hd});
  q.randomize(rng_);
  k.randomize(rng_);
  v.randomize(rng_);
  HostTensor out(c.dtype, {c.tq, c.hq, c.hd}), lse(DType::kF32, {c.tq, c.hq});
  HostTensor got(c.dtype, {c.tq, c.hq, c.hd}), got_lse(DType::kF32, {c.tq, c.hq});
  cpu::attention({q.view(), k.view(), v.view(), out.view(), lse.view(), 0});
  DeviceTensor dq = testing::to_device(q), dk = testing::to_device(k), dv = testing::to_device(v);
  // cuda::attention takes the tensor-core kernel for bf16, attention_simt the SIMT one: test both.
  for (auto* run : {&cuda::attention, &cuda::attention_simt}) {
    DeviceTensor dout = testing::poisoned_like(got), dlse = testing::poisoned_like(got_lse);
    run({dq.view, dk.view, dv.view, dout.view, dlse.view, 0}, nullptr);
    testing::download(dout, got);
    testing::download(dlse, got_lse);
    const char* path = run == &cuda::attention ? "attention" : "attention_simt";
    SCOPED_TRACE(path);
    testing::expect_twin(got, out, "attention out");
    testing::expect_twin(got_lse, lse, "attention lse");
  }
}

TEST_P(AttentionTwin, AttentionMass) {
  const AttnCase c = GetParam();
  HostTensor q(c.dtype, {c.tq, c.hq, c.hd}), k(c.dtype, {c.tk, c.hkv, c.hd}),
      v(c.dtype, {c.tk, c.hkv, c.hd});
  q.randomize(rng_);
  k.randomize(rng_);
  v.randomize(rng_);
  HostTensor out(c.dtype, {c.tq, c.hq, c.hd}), lse(DType::kF32, {c.tq, c.hq});
  cpu::attention({q.view(), k.view(), v.view(), out.view(), lse.view(), 0});
  const std::int64_t begin = c.tq / 3;
  HostTensor mass(DType::kF32, {c.hq, c.tk}), got(DType::kF32, {c.hq, c.tk});
  cpu::attention_mass({q.view(), k.view(), lse.view(), mass.view(), 0, begin});
  DeviceTensor dq = testing::to_device(q), dk = testing::to_device(k),
               dlse = testing::to_device(lse);
  DeviceTensor dmass = testing::poisoned_like(got);
  cuda::attention_mass({dq.view, dk.view, dlse.view, dmass.view, 0, begin}, nullptr);
  testing::download(dmass, got);
  testing::expect_twin(got, mass, "attention_mass");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTwin,
                         ::testing::Values(AttnCase{DType::kF32, 77, 77, 6, 2, 64},
                                           AttnCase{DType::kF32, 13, 100, 4, 4, 128},
                                           AttnCase{DType::kBF16, 301, 301, 14, 2, 64},
                                           AttnCase{DType::kBF16, 50, 333, 12, 2, 128},
                                           AttnCase{DType::kBF16, 1000, 1000, 4, 1, 128}),
                         [](const auto& param_info) {
                           const AttnCase& c = param_info.param;
                           return std::string(dtype_name(c.dtype)) + "_q" + std::to_string(c.tq) +
                                  "_k" + std::to_string(c.tk) + "_hd" + std::to_string(c.hd);
                         });

}  // namespace
}  // namespace kvshift::kernels
