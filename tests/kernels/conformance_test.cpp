// One conformance test for the kernel backends, in the manner of ggml's test-backend-ops: every
// case of op_cases() runs on every compiled backend, each (backend, case) its own test. The CPU
// twins are the oracle, so on them a case checks what needs no oracle: every output, NaN-poisoned
// first, comes out written and finite, and a second run gives the same bits. On CUDA a case skips
// with the runtime's reason when no device is usable and when cuda::supports() says no; otherwise
// its outputs (NaN-poisoned first) must match the CPU twin's within 1e-5 relative error for f32 and
// 1e-2 for bf16 and f16, bit for bit for index outputs. Inputs are fresh random each run; a failure
// prints the seed, and KVSHIFT_SEED=<seed> draws the same inputs again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance_cases.hpp"
#include "kernels/cpu.hpp"

#if KVSHIFT_TEST_HAVE_CUDA
#include "gpu_support.hpp"
#endif

namespace kvshift::kernels::testing {
namespace {

bool poisoned(Role r) { return r == Role::kOut || r == Role::kScratch; }

std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("KVSHIFT_SEED")) return std::stoull(s);
  return std::random_device{}();
}

std::vector<TensorView> views_of(const std::vector<HostTensor>& ts) {
  std::vector<TensorView> v;
  for (const HostTensor& t : ts) v.push_back(t.view());
  return v;
}

struct RunOnCpu {
  void operator()(const RmsNormDesc& d) const { cpu::rms_norm(d); }
  void operator()(const RopeDesc& d) const { cpu::rope(d); }
  void operator()(const EpilogueDesc& d) const { cpu::bias_rope_scatter(d); }
  void operator()(const SwigluDesc& d) const { cpu::swiglu(d); }
  void operator()(const AttentionDesc& d) const { cpu::attention(d); }
  void operator()(const SimtAttention& c) const { cpu::attention(c.desc); }
  void operator()(const WmmaAttention& c) const { cpu::attention(c.desc); }
  void operator()(const AttentionMassDesc& d) const { cpu::attention_mass(d); }
  void operator()(const GroupReduceDesc& d) const { cpu::group_reduce(d); }
  void operator()(const AvgPoolDesc& d) const { cpu::avg_pool(d); }
  void operator()(const LogMeanAttentionDesc& d) const { cpu::log_mean_attention(d); }
  void operator()(const Im2ColDesc& d) const { cpu::im2col(d); }
  void operator()(const BiasActDesc& d) const { cpu::bias_act(d); }
  void operator()(const LayerNormDesc& d) const { cpu::layer_norm(d); }
  void operator()(const WindowAttentionDesc& d) const { cpu::window_attention(d); }
  void operator()(const AxialHeadDesc& d) const { cpu::axial_head(d); }
  void operator()(const TopKDesc& d) const { cpu::top_k(d); }
  void operator()(const GatherDesc& d) const { cpu::kv_gather(d); }
  void operator()(const GemmDesc& d) const { cpu::gemm(d); }
  void operator()(const EmbedDesc& d) const { cpu::embed(d); }
  void operator()(const FillDesc& d) const { cpu::fill_uniform(d); }
  void operator()(const AnchorGatherDesc& d) const { cpu::anchor_gather(d); }
  void operator()(const ReconstructDesc& d) const { cpu::reconstruct(d); }
  void operator()(const ReconstructGroups& c) const {
    for (int launch = 0; launch < 2; ++launch) {
      for (const ReconstructDesc& d : c.groups) cpu::reconstruct(d);
    }
  }
};

/// The case on the CPU twins, on fresh host copies of its tensors (outputs poisoned).
std::vector<HostTensor> run_on_cpu(const OpCase& c, const std::vector<CaseTensor>& tensors,
                                   std::uint64_t seed) {
  std::vector<HostTensor> copies;
  for (const CaseTensor& t : tensors) {
    copies.push_back(t.host);
    if (poisoned(t.role)) std::memset(copies.back().data(), 0xFF, copies.back().bytes());
  }
  std::visit(RunOnCpu{}, c.call(views_of(copies), seed));
  return copies;
}

/// Every element written: finite for floats, no poison (-1) left for indices.
void expect_written(const HostTensor& t, const std::string& what) {
  int shown = 0;
  for (std::int64_t i = 0; i < t.numel() && shown < 8; ++i) {
    const bool ok = t.view().dtype == DType::kI32 ? t.geti(i) != -1 : std::isfinite(t.get(i));
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "] is " << t.get(i) << " after the run";
      ++shown;
    }
  }
}

void expect_same_bits(const HostTensor& got, const HostTensor& want, const std::string& what) {
  int shown = 0;
  const std::int64_t size = dtype_size(want.view().dtype);
  for (std::int64_t i = 0; i < want.numel() && shown < 8; ++i) {
    const auto* a = static_cast<const unsigned char*>(got.view().data) + i * size;
    const auto* b = static_cast<const unsigned char*>(want.view().data) + i * size;
    if (std::memcmp(a, b, size) != 0) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got.get(i) << " want " << want.get(i);
      ++shown;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

class CpuTwin : public ::testing::TestWithParam<OpCase> {};

TEST_P(CpuTwin, WritesEveryOutputFinitelyAndTheSameTwice) {
  const OpCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("inputs drawn with KVSHIFT_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<CaseTensor> tensors = c.make(rng);
  ASSERT_EQ(tensors.front().host.view().dtype, c.dtype) << "a case's dtype is its first tensor's";
  const std::vector<HostTensor> first = run_on_cpu(c, tensors, seed);
  const std::vector<HostTensor> second = run_on_cpu(c, tensors, seed);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == Role::kIn) continue;
    expect_written(first[i], tensors[i].name);
    expect_same_bits(second[i], first[i], tensors[i].name + " on a second run");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuTwin, ::testing::ValuesIn(op_cases()), case_name);

TEST(Conformance, EveryOpAndDtypeABackendRunsHasACase) {
  for (const Op op : kOps) {
    for (const DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32}) {
      bool has_case = false;
      for (const OpCase& c : op_cases()) has_case = has_case || (c.op == op && c.dtype == t);
      const std::string what = std::string(op_name(op)) + " " + std::string(dtype_name(t));
      // Equal, so that no case runs what the oracle cannot.
      EXPECT_EQ(has_case, cpu::supports(op, t)) << what;
#if KVSHIFT_TEST_HAVE_CUDA
      EXPECT_TRUE(has_case || !cuda::supports(op, t)) << what << " runs on CUDA";
#endif
    }
  }
}

#if KVSHIFT_TEST_HAVE_CUDA

struct RunOnCuda {
  const cuda::Context& ctx;
  void operator()(const RmsNormDesc& d) const { cuda::rms_norm(d, ctx.stream()); }
  void operator()(const RopeDesc& d) const { cuda::rope(d, ctx.stream()); }
  void operator()(const EpilogueDesc& d) const { cuda::bias_rope_scatter(d, ctx.stream()); }
  void operator()(const SwigluDesc& d) const { cuda::swiglu(d, ctx.stream()); }
  void operator()(const AttentionDesc& d) const { cuda::attention(d, ctx.stream()); }
  void operator()(const SimtAttention& c) const { cuda::attention_simt(c.desc, ctx.stream()); }
  void operator()(const WmmaAttention& c) const { cuda::attention_wmma(c.desc, ctx.stream()); }
  void operator()(const AttentionMassDesc& d) const { cuda::attention_mass(d, ctx.stream()); }
  void operator()(const GroupReduceDesc& d) const { cuda::group_reduce(d, ctx.stream()); }
  void operator()(const AvgPoolDesc& d) const { cuda::avg_pool(d, ctx.stream()); }
  void operator()(const LogMeanAttentionDesc& d) const {
    cuda::log_mean_attention(d, ctx.stream());
  }
  void operator()(const Im2ColDesc& d) const { cuda::im2col(d, ctx.stream()); }
  void operator()(const BiasActDesc& d) const { cuda::bias_act(d, ctx.stream()); }
  void operator()(const LayerNormDesc& d) const { cuda::layer_norm(d, ctx.stream()); }
  void operator()(const WindowAttentionDesc& d) const { cuda::window_attention(d, ctx.stream()); }
  void operator()(const AxialHeadDesc& d) const { cuda::axial_head(d, ctx.stream()); }
  void operator()(const TopKDesc& d) const { cuda::top_k(d, ctx.stream()); }
  void operator()(const GatherDesc& d) const { cuda::kv_gather(d, ctx.stream()); }
  void operator()(const GemmDesc& d) const { cuda::gemm(d, ctx); }
  void operator()(const EmbedDesc& d) const { cuda::embed(d, ctx.stream()); }
  void operator()(const FillDesc& d) const { cuda::fill_uniform(d, ctx.stream()); }
  void operator()(const AnchorGatherDesc& d) const { cuda::anchor_gather(d, ctx.stream()); }
  void operator()(const ReconstructDesc& d) const { cuda::reconstruct(d, ctx); }
  void operator()(const ReconstructGroups& c) const {
    cuda::ReconstructGraph run(c.groups, ctx, c.use_graph);
    EXPECT_EQ(run.uses_graph(), c.use_graph);
    run.launch();
    run.launch();
  }
};

/// The case on CUDA, on device copies of its tensors (outputs poisoned), downloaded.
std::vector<HostTensor> run_on_cuda(const OpCase& c, const std::vector<CaseTensor>& tensors,
                                    std::uint64_t seed) {
  std::vector<DeviceTensor> device;
  std::vector<TensorView> views;
  for (const CaseTensor& t : tensors) {
    device.push_back(poisoned(t.role) ? poisoned_like(t.host) : to_device(t.host));
    views.push_back(device.back().view);
  }
  const cuda::Stream stream;  // not the default one: a graph capture needs its own
  const cuda::Context ctx(stream.get());
  std::visit(RunOnCuda{ctx}, c.call(views, seed));
  std::vector<HostTensor> got;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    got.push_back(tensors[i].host);
    download(device[i], got.back());
  }
  return got;
}

/// ||got - want|| / ||want|| <= bound, with ||want|| > 0 and the first mismatches shown.
void expect_close(const HostTensor& got, const HostTensor& want, double bound,
                  const std::string& what) {
  const std::vector<float> w = want.values();
  ASSERT_GT(norm_of(w), 0.0) << what << ": the CPU twin produced all zeros";
  std::string report;
  const double err = relative_error(got.values(), w, &report);
  EXPECT_LE(err, bound) << what << ": relative error " << err << "; first mismatches:\n" << report;
}

double twin_bound(DType t) { return t == DType::kF32 ? 1e-5 : 1e-2; }

class CudaKernel : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaKernel, MatchesTheCpuTwin) {
  KVSHIFT_REQUIRE_GPU();
  const OpCase& c = GetParam();
  if (!cuda::supports(c.op, c.dtype)) {
    GTEST_SKIP() << "cuda::supports(" << op_name(c.op) << ", " << dtype_name(c.dtype)
                 << ") is false";
  }
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("inputs drawn with KVSHIFT_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<CaseTensor> tensors = c.make(rng);
  const std::vector<HostTensor> want = run_on_cpu(c, tensors, seed);
  const std::vector<HostTensor> got = run_on_cuda(c, tensors, seed);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Role role = tensors[i].role;
    if (role != Role::kOut && role != Role::kInOut) continue;
    const DType t = want[i].view().dtype;
    if (c.exact || t == DType::kI32) {
      expect_same_bits(got[i], want[i], tensors[i].name);
    } else {
      expect_close(got[i], want[i], twin_bound(c.bound_by_inputs ? c.dtype : t), tensors[i].name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaKernel, ::testing::ValuesIn(op_cases()), case_name);

#endif  // KVSHIFT_TEST_HAVE_CUDA

}  // namespace
}  // namespace kvshift::kernels::testing
