// CUDA vs CPU twins of top-K (indices must match exactly, ties included) and
// of KV compaction, and the cuBLAS GEMM against Eigen.
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "gpu_support.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

class SelectTwin : public ::testing::Test {
 protected:
  void SetUp() override { KVSHIFT_REQUIRE_GPU(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "inputs were drawn with seed " << seed_ << "\n";
  }
  const std::uint64_t seed_ = std::random_device{}();
  std::mt19937_64 rng_{seed_};
};

void expect_same_indices(const HostTensor& got, const HostTensor& want) {
  int shown = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    if (got.geti(i) != want.geti(i) && shown++ < 8) {
      ADD_FAILURE() << "index " << i << ": got " << got.geti(i) << " want " << want.geti(i);
    }
  }
}

TEST_F(SelectTwin, TopKMatchesExactly) {
  for (bool ties : {false, true}) {
    HostTensor scores(DType::kF32, {5, 1003}), idx(DType::kI32, {5, 123}),
        got(DType::kI32, {5, 123});
    scores.randomize(rng_);
    if (ties) {  // only 7 distinct values: most of the cut falls on ties
      for (std::int64_t i = 0; i < scores.numel(); ++i)
        scores.set(i, std::round(scores.get(i) * 2));
    }
    cpu::top_k({scores.view(), idx.view(), 4, 16});
    DeviceTensor ds = testing::to_device(scores), di = testing::poisoned_like(got);
    cuda::top_k({ds.view, di.view, 4, 16}, nullptr);
    testing::download(di, got);
    expect_same_indices(got, idx);
  }
}

TEST_F(SelectTwin, TopKKeepAllAndKeepNone) {
  HostTensor scores(DType::kF32, {2, 77}), all(DType::kI32, {2, 77}), got(DType::kI32, {2, 77});
  scores.randomize(rng_);
  cpu::top_k({scores.view(), all.view(), 0, 0});
  DeviceTensor ds = testing::to_device(scores), di = testing::poisoned_like(got);
  cuda::top_k({ds.view, di.view, 0, 0}, nullptr);
  testing::download(di, got);
  expect_same_indices(got, all);
  HostTensor none(DType::kI32, {2, 0});
  DeviceTensor dn = testing::to_device(none);
  EXPECT_NO_THROW(cuda::top_k({ds.view, dn.view, 0, 0}, nullptr));
}

TEST_F(SelectTwin, KvGather) {
  for (DType t : {DType::kF32, DType::kBF16}) {
    HostTensor src(t, {100, 3, 64}), scores(DType::kF32, {3, 100}), idx(DType::kI32, {3, 37});
    src.randomize(rng_);
    scores.randomize(rng_);
    cpu::top_k({scores.view(), idx.view(), 2, 5});
    HostTensor dst(t, {37, 3, 64}), got(t, {37, 3, 64});
    cpu::kv_gather({src.view(), idx.view(), dst.view()});
    DeviceTensor dsrc = testing::to_device(src), didx = testing::to_device(idx),
                 ddst = testing::poisoned_like(got);
    cuda::kv_gather({dsrc.view, didx.view, ddst.view}, nullptr);
    testing::download(ddst, got);
    testing::expect_twin(got, dst, "kv_gather");
  }
}

TEST_F(SelectTwin, GemmThroughCublas) {
  struct Case {
    DType in, out;
    bool transposed;
    float beta;
  };
  for (const Case c :
       {Case{DType::kF32, DType::kF32, true, 0}, Case{DType::kF32, DType::kF32, false, 1},
        Case{DType::kBF16, DType::kF32, true, 1}, Case{DType::kBF16, DType::kBF16, false, 0}}) {
    const std::int64_t m = 33, k = 70, n = 45;
    HostTensor a(c.in, {m, k}), b(c.in, {c.transposed ? n : k, c.transposed ? k : n});
    HostTensor cc(c.out, {m, n}), got(c.out, {m, n});
    a.randomize(rng_);
    b.randomize(rng_);
    cc.randomize(rng_);
    DeviceTensor da = testing::to_device(a), db = testing::to_device(b),
                 dc = testing::to_device(cc);
    if (c.beta == 0) dc.buffer.fill_bytes(0xFF);  // beta 0 must not read the poisoned output
    cpu::gemm({a.view(), b.view(), cc.view(), c.transposed, 1.5f, c.beta});
    cuda::Context ctx;
    cuda::gemm({da.view, db.view, dc.view, c.transposed, 1.5f, c.beta}, ctx);
    testing::download(dc, got);
    testing::expect_twin(got, cc, "gemm");
  }
}

}  // namespace
}  // namespace kvshift::kernels
