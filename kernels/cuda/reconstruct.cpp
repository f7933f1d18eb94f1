// RISK-KV reconstruction on CUDA: anchor gather -> cuBLAS GEMM -> fused
// bias + RoPE + scatter, for one group or (ReconstructGraph) for every group of
// a topology. Small shapes are launch-bound (three launches per group), so the
// whole sequence is captured once into a CUDA Graph and replayed. The groups
// share one RoPE (cos, sin) table, filled once at construction. Groups of one
// shape run their GEMMs as one batched cuBLAS call (cublasGemmBatchedEx) on
// workspaces of their own, so a short context fills the GPU with every
// group's tiles at once: gathers, then one GEMM, then epilogues.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kv_layout.hpp"

namespace kvshift::kernels::cuda {

namespace {

void reconstruct_with(const ReconstructDesc& d, const Context& ctx,
                      const detail::RopeTable& table) {
  validate(d);
  require_device("reconstruct", Device::kCuda,
                 {&d.cache, &d.weight, &d.bias, &d.x_workspace, &d.z_workspace});
  detail::anchor_gather(anchor_gather_of(d), table, ctx.stream());
  gemm(gemm_of(d), ctx);
  detail::bias_rope_scatter(epilogue_of(d), table, ctx.stream());
}

/// The RoPE parameters of a group's cache (the table's key).
detail::RopeTable rope_key(const ReconstructDesc& d, const void* cs) {
  return {cs, d.cache.shape[3], static_cast<int>(d.cache.shape[5]), d.theta, d.position_offset};
}

/// Most workspace bytes a ReconstructGraph allocates to batch its groups' GEMMs.
constexpr std::int64_t kBatchWorkspaceLimit = std::int64_t{1} << 30;

cudaDataType_t cublas_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

/// Whether the groups' GEMMs can be one batched call: two or more groups with one weight shape,
/// stride and dtype, one workspace shape and dtype, no group reading as an anchor a layer that
/// another group writes (the gathers all run before any epilogue), and workspaces within the limit.
bool batchable(const std::vector<ReconstructDesc>& groups) {
  if (groups.size() < 2) return false;
  const ReconstructDesc& f = groups.front();
  for (const ReconstructDesc& d : groups) {
    const bool same = d.weight.dtype == f.weight.dtype && d.weight.shape == f.weight.shape &&
                      d.weight.stride[0] == f.weight.stride[0] &&
                      d.x_workspace.dtype == f.x_workspace.dtype &&
                      d.z_workspace.dtype == f.z_workspace.dtype &&
                      d.x_workspace.shape[0] == f.x_workspace.shape[0];
    if (!same) return false;
    for (const ReconstructDesc& other : groups) {
      for (const int t : other.target_layers) {
        if (std::find(d.anchor_layers.begin(), d.anchor_layers.end(), t) != d.anchor_layers.end())
          return false;
      }
    }
  }
  const std::int64_t rows = f.x_workspace.shape[0];
  const std::int64_t per_group = rows * (f.weight.shape[0] * dtype_size(f.x_workspace.dtype) +
                                         f.weight.shape[1] * dtype_size(f.z_workspace.dtype));
  return per_group * static_cast<std::int64_t>(groups.size()) <= kBatchWorkspaceLimit;
}

}  // namespace

void reconstruct(const ReconstructDesc& d, const Context& ctx) {
  reconstruct_with(d, ctx, detail::RopeTable{});
}

ReconstructGraph::ReconstructGraph(std::vector<ReconstructDesc> groups, const Context& ctx,
                                   bool use_graph)
    : groups_(std::move(groups)), ctx_(ctx) {
  for (const ReconstructDesc& d : groups_) validate(d);
  if (!groups_.empty()) {
    const detail::RopeTable key = rope_key(groups_.front(), nullptr);
    rope_table_ =
        DeviceBuffer(static_cast<std::size_t>(detail::rope_table_bytes(key.tokens, key.head_dim)));
    detail::fill_rope_table(rope_key(groups_.front(), rope_table_.data()), ctx_.stream());
  }
  if (batchable(groups_)) prepare_batch();
  if (!use_graph) return;
  if (ctx_.stream() == nullptr) {
    throw std::invalid_argument("ReconstructGraph: graph capture needs a non-default stream");
  }
  // One eager run first, so that module loading and cuBLAS's own set-up happen outside the
  // capture (reconstruction is idempotent: anchors are never targets).
  launch_groups();
  ctx_.synchronize();
  cudaGraph_t graph = nullptr;
  KVSHIFT_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal));
  try {
    launch_groups();
  } catch (...) {
    cudaStreamEndCapture(ctx_.stream(), &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  KVSHIFT_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KVSHIFT_CUDA_CHECK(e);
  exec_ = exec;
}

ReconstructGraph::~ReconstructGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

void ReconstructGraph::launch() {
  if (exec_) {
    KVSHIFT_CUDA_CHECK(cudaGraphLaunch(exec_, ctx_.stream()));
    return;
  }
  launch_groups();
}

void ReconstructGraph::prepare_batch() {
  const ReconstructDesc& f = groups_.front();
  const std::int64_t g = static_cast<std::int64_t>(groups_.size());
  const std::int64_t rows = f.x_workspace.shape[0], a = f.weight.shape[0], t = f.weight.shape[1];
  const DType xt = f.x_workspace.dtype, zt = f.z_workspace.dtype;
  batch_x_ = DeviceBuffer(static_cast<std::size_t>(g * rows * a * dtype_size(xt)));  // [g, rows, a]
  batch_z_ = DeviceBuffer(static_cast<std::size_t>(g * rows * t * dtype_size(zt)));  // [g, rows, t]
  std::vector<const void*> ptrs;  // x of every group, then weights, then z
  batched_ = groups_;
  for (std::int64_t i = 0; i < g; ++i) {
    ReconstructDesc& d = batched_[static_cast<std::size_t>(i)];
    d.x_workspace = make_view(static_cast<char*>(batch_x_.data()) + i * rows * a * dtype_size(xt),
                              xt, Device::kCuda, {rows, a});
    d.z_workspace = make_view(static_cast<char*>(batch_z_.data()) + i * rows * t * dtype_size(zt),
                              zt, Device::kCuda, {rows, t});
    validate(d);
  }
  for (const ReconstructDesc& d : batched_) ptrs.push_back(d.x_workspace.data);
  for (const ReconstructDesc& d : batched_) ptrs.push_back(d.weight.data);
  for (const ReconstructDesc& d : batched_) ptrs.push_back(d.z_workspace.data);
  batch_ptrs_ = DeviceBuffer(ptrs.size() * sizeof(void*));
  batch_ptrs_.upload(ptrs.data(), ptrs.size() * sizeof(void*));
}

void ReconstructGraph::batched_gemm() {
  const ReconstructDesc& f = batched_.front();
  const auto g = static_cast<int>(batched_.size());
  const auto rows = static_cast<int>(f.x_workspace.shape[0]);
  const auto a = static_cast<int>(f.weight.shape[0]), t = static_cast<int>(f.weight.shape[1]);
  const auto ldb = static_cast<int>(std::max<std::int64_t>(f.weight.stride[0], t));
  auto* const* ptrs = static_cast<void* const*>(batch_ptrs_.data());
  const float alpha = 1, beta = 0;
  // Row-major z[rows, t] = x[rows, a] * w[a, t] as the column-major z^T = w^T x^T
  // (gemm_cublas.cpp).
  KVSHIFT_CUBLAS_CHECK(cublasGemmBatchedEx(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, t, rows, a,
                                           &alpha, ptrs + g, cublas_type(f.weight.dtype), ldb, ptrs,
                                           cublas_type(f.x_workspace.dtype), a, &beta, ptrs + 2 * g,
                                           cublas_type(f.z_workspace.dtype), t, g,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void ReconstructGraph::launch_groups() {
  if (!batched_.empty()) {
    const detail::RopeTable table = rope_key(groups_.front(), rope_table_.data());
    for (const ReconstructDesc& d : batched_) {
      detail::anchor_gather(anchor_gather_of(d), table, ctx_.stream());
    }
    batched_gemm();
    for (const ReconstructDesc& d : batched_) {
      detail::bias_rope_scatter(epilogue_of(d), table, ctx_.stream());
    }
    return;
  }
  // A group whose cache, theta or offset differs from the first's computes its own angles
  // (RopeTable::matches is checked per op).
  for (const ReconstructDesc& d : groups_) {
    reconstruct_with(d, ctx_, rope_key(groups_.front(), rope_table_.data()));
  }
}

}  // namespace kvshift::kernels::cuda
