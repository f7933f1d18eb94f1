// make_cuda_profiler(): without CUDA compiled it throws NotCompiled with a
// clear message; compiled but without a device it throws naming the reason;
// with a device it times every op of a small model and returns sane rows.
#include <gtest/gtest.h>

#include <set>

#include "backend/profiler.hpp"
#include "cost_model/topology.hpp"

#ifdef KVSHIFT_TEST_HAVE_CUDA
#include "gpu_support.hpp"
#endif

namespace kvshift::backend {
namespace {

#ifndef KVSHIFT_TEST_HAVE_CUDA

TEST(CudaProfiler, SaysItWasNotCompiled) {
  try {
    make_cuda_profiler();
    FAIL() << "expected NotCompiled";
  } catch (const NotCompiled& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA backend not compiled"), std::string::npos)
        << e.what();
  }
}

#else

TEST(CudaProfiler, WithoutADeviceSaysWhy) {
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_cuda_profiler();
    FAIL() << "expected an error without a device";
  } catch (const NotCompiled&) {
    FAIL() << "CUDA is compiled into this build";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA backend: "), std::string::npos) << e.what();
  }
}

TEST(CudaProfiler, TimesEveryOpOfASmallModel) {
  KVSHIFT_REQUIRE_GPU();
  ProfileRequest req;
  req.model = cost_model::find_model("smollm2-135m");
  req.proxy = cost_model::find_model("smollm2-135m");
  req.topology = cost_model::Topology::from_groups(req.model.layers, {2, 3, 7});
  req.tokens = {100, 300};
  req.sharing = {1, 3};
  req.repeats = 3;
  auto profiler = make_cuda_profiler();
  EXPECT_EQ(profiler->backend_name(), "cuda");
  EXPECT_FALSE(profiler->device_description().empty());
  const auto rows = profiler->run(req);
  std::set<std::string> ops;
  for (const OpTiming& r : rows) {
    ops.insert(r.op);
    EXPECT_GT(r.median_s, 0) << r.op;
    EXPECT_LE(r.p10_s, r.median_s) << r.op;
    EXPECT_LE(r.median_s, r.p90_s) << r.op;
    EXPECT_EQ(r.repeats, 3);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"prefill", "reconstruct", "proxy_score", "prune"}));
  EXPECT_EQ(rows.size(), 2u * (1 + 2 + 1 + 1));
}

#endif

}  // namespace
}  // namespace kvshift::backend
