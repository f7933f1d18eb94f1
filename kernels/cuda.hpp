// CUDA kernels behind the same descriptors as the CPU twins (ops.hpp). This
// header is plain C++: CUDA types are only forward-declared, so code that does
// not compile CUDA can include it and link kvshift_kernels_cuda. Every call
// validates its descriptor, requires device views, launches on the given
// stream and checks the launch; errors throw CudaError naming the statement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/ops.hpp"

struct CUstream_st;
struct cublasContext;
struct CUgraphExec_st;

namespace kvshift::kernels::cuda {

/// A failed CUDA runtime or cuBLAS call: statement, error text, file:line.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Whether the CUDA kernel of `op` runs with `dtype` as its first tensor's dtype (backends.hpp):
/// every dtype its CPU twin runs. Shape limits come on top: head_dim 64 or 128 (attention,
/// attention_simt, attention_mass), head_dim <= 256 (window_attention), <= 4096 sources
/// (axial_head), <= 8 anchor layers (anchor_gather, reconstruct), an even head_dim in every
/// segment (bias_rope_scatter).
bool supports(Op op, DType dtype);

/// Number of usable CUDA devices (0 if the driver or device is missing).
int device_count();
/// Why no device can be used ("" when one can): the runtime's own error text.
std::string device_unavailable_reason();

/// Waits for all work on the current device (cudaDeviceSynchronize).
void device_synchronize();

/// Owning device allocation (cudaMalloc).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  /// Synchronous host -> device copy of `bytes` (<= size).
  void upload(const void* host, std::size_t bytes);
  /// Synchronous device -> host copy.
  void download(void* host, std::size_t bytes) const;
  /// Sets every byte (0xFF poisons floats with NaN).
  void fill_bytes(unsigned char value);
  /// A contiguous view of this buffer with `shape`.
  TensorView view(DType dtype, std::initializer_list<std::int64_t> shape) const;

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// An owned non-blocking CUDA stream.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream_st* get() const { return stream_; }

 private:
  CUstream_st* stream_ = nullptr;
};

/// A stream plus a cuBLAS handle bound to it and a fixed cuBLAS workspace (graph-capture safe).
class Context {
 public:
  /// Uses `stream` (nullptr = the legacy default stream); does not own it.
  explicit Context(CUstream_st* stream = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  CUstream_st* stream() const { return stream_; }
  cublasContext* cublas() const { return cublas_; }
  /// Waits for all work on the stream.
  void synchronize() const;

 private:
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  DeviceBuffer workspace_;
};

void rms_norm(const RmsNormDesc& d, CUstream_st* stream);
void rope(const RopeDesc& d, CUstream_st* stream);
void bias_rope_scatter(const EpilogueDesc& d, CUstream_st* stream);
void swiglu(const SwigluDesc& d, CUstream_st* stream);
/// head_dim 64 or 128. bf16 q/k/v with 16-byte aligned rows and no key mask run on the
/// FlashAttention-2-style tensor-core kernel (mma.sync, cp.async double buffering), the rest
/// (other dtypes, a key mask) on the SIMT kernel.
void attention(const AttentionDesc& d, CUstream_st* stream);
/// The earlier WMMA tensor-core kernel, kept as a baseline: the same inputs as the fast path
/// (throws std::invalid_argument for others).
void attention_wmma(const AttentionDesc& d, CUstream_st* stream);
/// The SIMT kernel for any dtype (fp32 math throughout); head_dim 64 or 128.
void attention_simt(const AttentionDesc& d, CUstream_st* stream);
/// head_dim 64 or 128.
void attention_mass(const AttentionMassDesc& d, CUstream_st* stream);
void group_reduce(const GroupReduceDesc& d, CUstream_st* stream);
void avg_pool(const AvgPoolDesc& d, CUstream_st* stream);
void log_mean_attention(const LogMeanAttentionDesc& d, CUstream_st* stream);
void im2col(const Im2ColDesc& d, CUstream_st* stream);
void bias_act(const BiasActDesc& d, CUstream_st* stream);
void layer_norm(const LayerNormDesc& d, CUstream_st* stream);
/// head_dim <= 256.
void window_attention(const WindowAttentionDesc& d, CUstream_st* stream);
/// Up to 4096 sources (three shared-memory rows of them per block).
void axial_head(const AxialHeadDesc& d, CUstream_st* stream);
void top_k(const TopKDesc& d, CUstream_st* stream);
void kv_gather(const GatherDesc& d, CUstream_st* stream);
void embed(const EmbedDesc& d, CUstream_st* stream);
void fill_uniform(const FillDesc& d, CUstream_st* stream);
void anchor_gather(const AnchorGatherDesc& d, CUstream_st* stream);
/// cublasGemmEx, fp32 accumulation.
void gemm(const GemmDesc& d, const Context& ctx);
/// One group: anchor gather -> cuBLAS GEMM -> bias + RoPE + scatter.
void reconstruct(const ReconstructDesc& d, const Context& ctx);

/// The kernels as one object for the op programs (backend/decoder_program.hpp,
/// backend/cuda/mapper_program.hpp): run(desc) per descriptor on `ctx`'s stream, as cpu::Ops
/// on the host.
struct Ops {
  const Context& ctx;
  void run(const RmsNormDesc& d) const { rms_norm(d, ctx.stream()); }
  void run(const EpilogueDesc& d) const { bias_rope_scatter(d, ctx.stream()); }
  void run(const SwigluDesc& d) const { swiglu(d, ctx.stream()); }
  void run(const AttentionDesc& d) const { attention(d, ctx.stream()); }
  void run(const AttentionMassDesc& d) const { attention_mass(d, ctx.stream()); }
  void run(const GemmDesc& d) const { gemm(d, ctx); }
  void run(const Im2ColDesc& d) const { im2col(d, ctx.stream()); }
  void run(const BiasActDesc& d) const { bias_act(d, ctx.stream()); }
  void run(const LayerNormDesc& d) const { layer_norm(d, ctx.stream()); }
  void run(const WindowAttentionDesc& d) const { window_attention(d, ctx.stream()); }
  void run(const AxialHeadDesc& d) const { axial_head(d, ctx.stream()); }
};

/// Rows (requests * tokens) up to which a reconstruction is launch-bound and worth a graph.
inline constexpr std::int64_t kGraphRowLimit = 16384;

/// Reconstruction of every omitted group of a topology. With `use_graph` the launches are
/// captured once into a CUDA Graph and each launch() replays it (the views must stay valid).
/// Groups that share a cache, theta and position offset read their RoPE angles from one
/// (cos, sin) table computed at construction (in double, as everywhere: the same floats).
/// Two or more groups of one shape (and no group reading another's targets) run their GEMMs
/// as one batched cuBLAS call on workspaces the graph allocates (at most 1 GiB; beyond that,
/// or for groups that differ, each group runs on the workspaces of its descriptor).
class ReconstructGraph {
 public:
  ReconstructGraph(std::vector<ReconstructDesc> groups, const Context& ctx, bool use_graph);
  ~ReconstructGraph();
  ReconstructGraph(const ReconstructGraph&) = delete;
  ReconstructGraph& operator=(const ReconstructGraph&) = delete;
  /// Enqueues the whole reconstruction on the context's stream.
  void launch();
  bool uses_graph() const { return exec_ != nullptr; }
  /// Whether the groups' GEMMs run as one batched call.
  bool batches_groups() const { return !batched_.empty(); }

 private:
  void launch_groups();
  void prepare_batch();
  void batched_gemm();

  std::vector<ReconstructDesc> groups_;
  const Context& ctx_;
  DeviceBuffer rope_table_;               ///< [tokens, head_dim / 2] (cos, sin) of the first group
  std::vector<ReconstructDesc> batched_;  ///< groups_ on the batch workspaces (or empty)
  DeviceBuffer batch_x_, batch_z_;        ///< [groups, rows, x_cols], [groups, rows, z_cols]
  DeviceBuffer batch_ptrs_;               ///< device pointers: every x, then weights, then z
  CUgraphExec_st* exec_ = nullptr;
};

}  // namespace kvshift::kernels::cuda
