// RISK-KV reconstruction on CUDA: anchor gather -> cuBLAS GEMM -> fused
// bias + RoPE + scatter, for one group or (ReconstructGraph) for every group of
// a topology. Small shapes are launch-bound (three launches per group), so the
// whole sequence is captured once into a CUDA Graph and replayed.
#include <cuda_runtime.h>

#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::kernels::cuda {

void reconstruct(const ReconstructDesc& d, const Context& ctx) {
  validate(d);
  require_device("reconstruct", Device::kCuda,
                 {&d.cache, &d.weight, &d.bias, &d.x_workspace, &d.z_workspace});
  anchor_gather(anchor_gather_of(d), ctx.stream());
  gemm(gemm_of(d), ctx);
  bias_rope_scatter(epilogue_of(d), ctx.stream());
}

ReconstructGraph::ReconstructGraph(std::vector<ReconstructDesc> groups, const Context& ctx,
                                   bool use_graph)
    : groups_(std::move(groups)), ctx_(ctx) {
  for (const ReconstructDesc& d : groups_) validate(d);
  if (!use_graph) return;
  if (ctx_.stream() == nullptr) {
    throw std::invalid_argument("ReconstructGraph: graph capture needs a non-default stream");
  }
  // One eager run first, so that module loading and cuBLAS's own set-up happen outside the
  // capture (reconstruction is idempotent: anchors are never targets).
  for (const ReconstructDesc& d : groups_) reconstruct(d, ctx_);
  ctx_.synchronize();
  cudaGraph_t graph = nullptr;
  KVSHIFT_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal));
  try {
    for (const ReconstructDesc& d : groups_) reconstruct(d, ctx_);
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
  for (const ReconstructDesc& d : groups_) reconstruct(d, ctx_);
}

}  // namespace kvshift::kernels::cuda
