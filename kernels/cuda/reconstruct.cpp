// RISK-KV reconstruction on CUDA: anchor gather -> cuBLAS GEMM -> fused
// bias + RoPE + scatter, for one group or (ReconstructGraph) for every group of
// a topology. Small shapes are launch-bound (three launches per group), so the
// whole sequence is captured once into a CUDA Graph and replayed. The groups
// share one RoPE (cos, sin) table, filled once at construction.
#include <cuda_runtime.h>

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

void ReconstructGraph::launch_groups() {
  // A group whose cache, theta or offset differs from the first's computes its own angles
  // (RopeTable::matches is checked per op).
  for (const ReconstructDesc& d : groups_) {
    reconstruct_with(d, ctx_, rope_key(groups_.front(), rope_table_.data()));
  }
}

}  // namespace kvshift::kernels::cuda
