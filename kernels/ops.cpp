// Descriptor validation shared by the CPU twins and the CUDA kernels, and the
// decomposition of a RISK-KV reconstruction into its three steps.
#include "kernels/ops.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvshift::kernels {
namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

/// Checks rank, unit innermost stride, and (if given) the dtype set.
void check_view(const char* op, const char* field, const TensorView& v, int rank,
                std::initializer_list<DType> dtypes = {}) {
  if (v.data == nullptr && v.numel() != 0) fail(op, std::string(field) + " is null");
  if (v.rank != rank) {
    fail(op, std::string(field) + " must have rank " + std::to_string(rank) + " (got " +
                 v.describe() + ")");
  }
  if (rank > 0 && v.shape[rank - 1] > 1 && v.stride[rank - 1] != 1) {
    fail(op, std::string(field) + " must have a unit innermost stride (got " + v.describe() + ")");
  }
  for (int i = 0; i < rank; ++i) {
    if (v.shape[i] < 0 || v.stride[i] < 0) fail(op, std::string(field) + " has a negative extent");
  }
  if (dtypes.size() == 0) return;
  for (DType t : dtypes) {
    if (t == v.dtype) return;
  }
  fail(op, std::string(field) + " has unsupported dtype " + std::string(dtype_name(v.dtype)));
}

void check_dim(const char* op, const char* field, int dim, std::int64_t got, std::int64_t want) {
  if (got != want) {
    std::ostringstream s;
    s << field << ".shape[" << dim << "] must be " << want << " (got " << got << ")";
    fail(op, s.str());
  }
}

constexpr std::initializer_list<DType> kFloats = {DType::kF32, DType::kBF16, DType::kF16};

void check_rope_dims(const char* op, std::int64_t head_dim) {
  if (head_dim % 2 != 0 || head_dim <= 0) {
    fail(op, "head_dim must be even and positive (got " + std::to_string(head_dim) + ")");
  }
}

void check_layers(const char* op, const char* field, const std::vector<int>& layers,
                  std::int64_t layer_count) {
  if (layers.empty()) fail(op, std::string(field) + " is empty");
  for (int l : layers) {
    if (l < 0 || l >= layer_count) {
      fail(op, std::string(field) + " holds layer " + std::to_string(l) + " outside [0, " +
                   std::to_string(layer_count) + ")");
    }
  }
}

}  // namespace

void require_device(const char* op, Device device, std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views) {
    if (v->data != nullptr && v->device != device) {
      fail(op, "view " + v->describe() + " is not on the " +
                   (device == Device::kHost ? "host" : "CUDA device"));
    }
  }
}

void validate(const RmsNormDesc& d) {
  const char* op = "rms_norm";
  check_view(op, "x", d.x, 2, kFloats);
  check_view(op, "weight", d.weight, 1, kFloats);
  check_view(op, "out", d.out, 2, kFloats);
  check_dim(op, "weight", 0, d.weight.shape[0], d.x.shape[1]);
  check_dim(op, "out", 0, d.out.shape[0], d.x.shape[0]);
  check_dim(op, "out", 1, d.out.shape[1], d.x.shape[1]);
  if (!(d.eps > 0)) fail(op, "eps must be > 0");
}

void validate(const RopeDesc& d) {
  const char* op = "rope";
  check_view(op, "x", d.x, 3, kFloats);
  check_view(op, "out", d.out, 3, kFloats);
  for (int i = 0; i < 3; ++i) check_dim(op, "out", i, d.out.shape[i], d.x.shape[i]);
  check_rope_dims(op, d.x.shape[2]);
  if (!(d.theta > 1)) fail(op, "theta must be > 1");
  if (d.position_offset < 0) fail(op, "position_offset must be >= 0");
}

void validate(const EpilogueDesc& d) {
  const char* op = "bias_rope_scatter";
  check_view(op, "z", d.z, 2, {DType::kF32, DType::kBF16});
  const std::int64_t width = d.z.shape[1];
  if (!d.bias.empty()) {
    check_view(op, "bias", d.bias, 1, {DType::kF32});
    check_dim(op, "bias", 0, d.bias.shape[0], width);
  }
  if (d.segments.empty() || d.segments.size() > EpilogueDesc::kMaxSegments) {
    fail(op, "needs 1.." + std::to_string(EpilogueDesc::kMaxSegments) + " segments (got " +
                 std::to_string(d.segments.size()) + ")");
  }
  for (const EpilogueSegment& s : d.segments) {
    check_view(op, "segment.dst", s.dst, 4, kFloats);
    check_dim(op, "segment.dst", 0, s.dst.shape[0] * s.dst.shape[1], d.z.shape[0]);
    const std::int64_t cols = s.dst.shape[2] * s.dst.shape[3];
    if (s.column < 0 || s.column + cols > width) {
      fail(op, "segment columns [" + std::to_string(s.column) + ", " +
                   std::to_string(s.column + cols) + ") exceed z width " + std::to_string(width));
    }
    if (s.rope) check_rope_dims(op, s.dst.shape[3]);
    if (!s.head_norm.empty()) {
      check_view(op, "segment.head_norm", s.head_norm, 1, {DType::kF32});
      check_dim(op, "segment.head_norm", 0, s.head_norm.shape[0], s.dst.shape[3]);
      if (!(s.norm_eps > 0)) fail(op, "segment.norm_eps must be > 0");
    }
  }
  if (!(d.theta > 1)) fail(op, "theta must be > 1");
}

void validate(const SwigluDesc& d) {
  const char* op = "swiglu";
  check_view(op, "gate", d.gate, 2, kFloats);
  check_view(op, "up", d.up, 2, kFloats);
  check_view(op, "out", d.out, 2, kFloats);
  for (int i = 0; i < 2; ++i) {
    check_dim(op, "up", i, d.up.shape[i], d.gate.shape[i]);
    check_dim(op, "out", i, d.out.shape[i], d.gate.shape[i]);
  }
}

namespace {
void check_qk(const char* op, const TensorView& q, const TensorView& k) {
  check_view(op, "q", q, 3, kFloats);
  check_view(op, "k", k, 3, {q.dtype});
  check_dim(op, "k", 2, k.shape[2], q.shape[2]);
  if (k.shape[1] <= 0 || q.shape[1] % k.shape[1] != 0) {
    fail(op, "q_heads (" + std::to_string(q.shape[1]) + ") must be a multiple of kv_heads (" +
                 std::to_string(k.shape[1]) + ")");
  }
  if (q.shape[0] > k.shape[0]) {
    fail(op, "q_tokens (" + std::to_string(q.shape[0]) + ") exceeds kv_tokens (" +
                 std::to_string(k.shape[0]) + ")");
  }
}
}  // namespace

void validate(const AttentionDesc& d) {
  const char* op = "attention";
  check_qk(op, d.q, d.k);
  check_view(op, "v", d.v, 3, {d.q.dtype});
  check_view(op, "out", d.out, 3, kFloats);
  for (int i = 0; i < 3; ++i) {
    check_dim(op, "v", i, d.v.shape[i], d.k.shape[i]);
    check_dim(op, "out", i, d.out.shape[i], d.q.shape[i]);
  }
  if (!d.lse.empty()) {
    check_view(op, "lse", d.lse, 2, {DType::kF32});
    check_dim(op, "lse", 0, d.lse.shape[0], d.q.shape[0]);
    check_dim(op, "lse", 1, d.lse.shape[1], d.q.shape[1]);
  }
  if (!d.key_mask.empty()) {
    check_view(op, "key_mask", d.key_mask, 2, {DType::kI32});
    check_dim(op, "key_mask", 0, d.key_mask.shape[0], d.k.shape[0]);
    check_dim(op, "key_mask", 1, d.key_mask.shape[1], d.k.shape[1]);
  }
  if (d.scale < 0) fail(op, "scale must be >= 0");
  if (d.window < 0) fail(op, "window must be >= 0");
}

void validate(const AttentionMassDesc& d) {
  const char* op = "attention_mass";
  check_qk(op, d.q, d.k);
  check_view(op, "lse", d.lse, 2, {DType::kF32});
  check_dim(op, "lse", 0, d.lse.shape[0], d.q.shape[0]);
  check_dim(op, "lse", 1, d.lse.shape[1], d.q.shape[1]);
  check_view(op, "out", d.out, 2, {DType::kF32});
  check_dim(op, "out", 0, d.out.shape[0], d.q.shape[1]);
  check_dim(op, "out", 1, d.out.shape[1], d.k.shape[0]);
  if (d.query_begin < 0 || d.query_begin > d.q.shape[0]) {
    fail(op, "query_begin must lie in [0, q_tokens] (got " + std::to_string(d.query_begin) + ")");
  }
  if (d.scale < 0) fail(op, "scale must be >= 0");
  if (d.window < 0) fail(op, "window must be >= 0");
}

namespace {
void check_f32_2d(const char* op, const char* field, const TensorView& v, std::int64_t rows,
                  std::int64_t cols) {
  check_view(op, field, v, 2, {DType::kF32});
  check_dim(op, field, 0, v.shape[0], rows);
  check_dim(op, field, 1, v.shape[1], cols);
}

void check_f32_1d(const char* op, const char* field, const TensorView& v, std::int64_t size) {
  check_view(op, field, v, 1, {DType::kF32});
  check_dim(op, field, 0, v.shape[0], size);
}

void check_odd(const char* op, const char* field, std::int64_t k) {
  if (k <= 0 || k % 2 == 0) {
    fail(op, std::string(field) + " must be odd and positive (got " + std::to_string(k) + ")");
  }
}
}  // namespace

void validate(const GroupReduceDesc& d) {
  const char* op = "group_reduce";
  check_view(op, "in", d.in, 2, {DType::kF32});
  check_f32_2d(op, "out", d.out, d.out.shape[0], d.in.shape[1]);
  if (d.out.shape[0] <= 0 || d.in.shape[0] % d.out.shape[0] != 0) {
    fail(op, "in rows (" + std::to_string(d.in.shape[0]) + ") must be a multiple of out rows (" +
                 std::to_string(d.out.shape[0]) + ")");
  }
}

void validate(const AvgPoolDesc& d) {
  const char* op = "avg_pool";
  check_view(op, "in", d.in, 2, {DType::kF32});
  check_f32_2d(op, "out", d.out, d.in.shape[0], d.in.shape[1]);
  check_odd(op, "kernel", d.kernel);
}

void validate(const LogMeanAttentionDesc& d) {
  const char* op = "log_mean_attention";
  check_view(op, "mass", d.mass, 2, {DType::kF32});
  check_f32_2d(op, "out", d.out, d.mass.shape[0], d.mass.shape[1]);
  if (!(d.eps > 0)) fail(op, "eps must be > 0");
}

void validate(const Im2ColDesc& d) {
  const char* op = "im2col";
  check_view(op, "x", d.x, 2, {DType::kF32});
  check_odd(op, "kernel", d.kernel);
  check_f32_2d(op, "cols", d.cols, d.x.shape[1], d.x.shape[0] * d.kernel);
}

void validate(const BiasActDesc& d) {
  const char* op = "bias_act";
  check_view(op, "x", d.x, 2, {DType::kF32});
  check_f32_1d(op, "bias", d.bias, d.x.shape[1]);
}

void validate(const LayerNormDesc& d) {
  const char* op = "layer_norm";
  check_view(op, "x", d.x, 2, {DType::kF32});
  check_f32_1d(op, "weight", d.weight, d.x.shape[1]);
  check_f32_1d(op, "bias", d.bias, d.x.shape[1]);
  check_f32_2d(op, "out", d.out, d.x.shape[0], d.x.shape[1]);
  if (!(d.eps > 0)) fail(op, "eps must be > 0");
}

void validate(const WindowAttentionDesc& d) {
  const char* op = "window_attention";
  check_view(op, "q", d.q, 3, {DType::kF32});
  for (const auto& [field, v] : {std::pair{"k", &d.k}, {"v", &d.v}, {"out", &d.out}}) {
    check_view(op, field, *v, 3, {DType::kF32});
    for (int i = 0; i < 3; ++i) check_dim(op, field, i, v->shape[i], d.q.shape[i]);
  }
  if (d.radius < 0) fail(op, "radius must be >= 0");
  if (d.scale < 0) fail(op, "scale must be >= 0");
}

void validate(const AxialHeadDesc& d) {
  const char* op = "axial_head";
  check_view(op, "x", d.x, 2, {DType::kF32});
  const std::int64_t sources = d.x.shape[0], tokens = d.x.shape[1];
  check_view(op, "g", d.g, 2, {DType::kF32});
  const std::int64_t targets = d.g.shape[0];
  check_dim(op, "g", 1, d.g.shape[1], sources);
  check_f32_1d(op, "u", d.u, targets);
  check_f32_1d(op, "vb", d.vb, sources);
  check_f32_2d(op, "time_terms", d.time_terms, tokens, sources + 2);
  check_f32_2d(op, "y", d.y, targets, tokens);
  if (!(d.scale > 0)) fail(op, "scale must be > 0");
}

void validate(const TopKDesc& d) {
  const char* op = "top_k";
  check_view(op, "scores", d.scores, 2, {DType::kF32});
  check_view(op, "indices", d.indices, 2, {DType::kI32});
  check_dim(op, "indices", 0, d.indices.shape[0], d.scores.shape[0]);
  const std::int64_t tokens = d.scores.shape[1];
  const std::int64_t keep = d.indices.shape[1];
  if (keep > tokens) {
    fail(op, "keep (" + std::to_string(keep) + ") exceeds tokens (" + std::to_string(tokens) + ")");
  }
  if (d.sink < 0 || d.recent < 0) fail(op, "sink and recent must be >= 0");
  const std::int64_t forced = std::min(tokens, d.sink + d.recent);
  if (forced > keep) {
    fail(op, "keep (" + std::to_string(keep) + ") is below the " + std::to_string(forced) +
                 " sink + recent tokens that are always kept");
  }
  if (tokens >= (std::int64_t{1} << 31)) fail(op, "tokens must fit in i32");
}

void validate(const GatherDesc& d) {
  const char* op = "kv_gather";
  check_view(op, "src", d.src, 3, kFloats);
  check_view(op, "indices", d.indices, 2, {DType::kI32});
  check_view(op, "dst", d.dst, 3, {d.src.dtype});
  check_dim(op, "indices", 0, d.indices.shape[0], d.src.shape[1]);
  check_dim(op, "dst", 0, d.dst.shape[0], d.indices.shape[1]);
  check_dim(op, "dst", 1, d.dst.shape[1], d.src.shape[1]);
  check_dim(op, "dst", 2, d.dst.shape[2], d.src.shape[2]);
}

void validate(const GemmDesc& d) {
  const char* op = "gemm";
  check_view(op, "a", d.a, 2, kFloats);
  check_view(op, "b", d.b, 2, {d.a.dtype});
  check_view(op, "c", d.c, 2, {DType::kF32, d.a.dtype});
  const std::int64_t k = d.a.shape[1];
  const std::int64_t n = d.c.shape[1];
  check_dim(op, "c", 0, d.c.shape[0], d.a.shape[0]);
  check_dim(op, "b", d.b_transposed ? 1 : 0, d.b.shape[d.b_transposed ? 1 : 0], k);
  check_dim(op, "b", d.b_transposed ? 0 : 1, d.b.shape[d.b_transposed ? 0 : 1], n);
}

void validate(const EmbedDesc& d) {
  const char* op = "embed";
  check_view(op, "table", d.table, 2, kFloats);
  check_view(op, "ids", d.ids, 1, {DType::kI32});
  check_view(op, "out", d.out, 2, kFloats);
  check_dim(op, "out", 0, d.out.shape[0], d.ids.shape[0]);
  check_dim(op, "out", 1, d.out.shape[1], d.table.shape[1]);
}

void validate(const FillDesc& d) {
  const char* op = "fill_uniform";
  if (d.out.rank < 1) fail(op, "out must have rank >= 1");
  check_view(op, "out", d.out, d.out.rank, kFloats);
  if (!d.out.contiguous()) fail(op, "out must be contiguous (got " + d.out.describe() + ")");
  if (!(d.hi >= d.lo)) fail(op, "hi must be >= lo");
}

void validate(const AnchorGatherDesc& d) {
  const char* op = "anchor_gather";
  check_view(op, "cache", d.cache, 6, kFloats);
  if (!d.cache.contiguous()) fail(op, "cache must be contiguous");
  check_dim(op, "cache", 2, d.cache.shape[2], 2);
  check_layers(op, "anchor_layers", d.anchor_layers, d.cache.shape[1]);
  check_rope_dims(op, d.cache.shape[5]);
  const ReconstructShapes s =
      reconstruct_shapes(d.cache, static_cast<int>(d.anchor_layers.size()), 1);
  check_view(op, "x", d.x, 2, kFloats);
  check_dim(op, "x", 0, d.x.shape[0], s.rows);
  check_dim(op, "x", 1, d.x.shape[1], s.x_cols);
  if (!(d.theta > 1)) fail(op, "theta must be > 1");
}

void validate(const ReconstructDesc& d) {
  const char* op = "reconstruct";
  validate(anchor_gather_of(d));
  check_layers(op, "target_layers", d.target_layers, d.cache.shape[1]);
  for (int t : d.target_layers) {
    for (int a : d.anchor_layers) {
      if (a == t) fail(op, "layer " + std::to_string(t) + " is both an anchor and a target");
    }
  }
  check_view(op, "weight", d.weight, 2, kFloats);
  check_view(op, "x_workspace", d.x_workspace, 2, {d.weight.dtype});
  check_view(op, "bias", d.bias, 1, {DType::kF32});
  validate(gemm_of(d));
  validate(epilogue_of(d));
}

ReconstructShapes reconstruct_shapes(const TensorView& cache, int anchors, int targets) {
  const std::int64_t w = 2 * cache.shape[4] * cache.shape[5];
  return {cache.shape[0] * cache.shape[3], anchors * w, targets * w};
}

TensorView cache_layer(const TensorView& cache, int layer, int kv) {
  TensorView v = cache;
  v.data = static_cast<char*>(cache.data) +
           (layer * cache.stride[1] + kv * cache.stride[2]) * dtype_size(cache.dtype);
  v.rank = 4;
  v.shape = {cache.shape[0], cache.shape[3], cache.shape[4], cache.shape[5], 0, 0};
  v.stride = {cache.stride[0], cache.stride[3], cache.stride[4], cache.stride[5], 0, 0};
  return v;
}

AnchorGatherDesc anchor_gather_of(const ReconstructDesc& d) {
  return {d.cache, d.anchor_layers, d.x_workspace, d.theta, d.position_offset};
}

GemmDesc gemm_of(const ReconstructDesc& d) {
  GemmDesc g;
  g.a = d.x_workspace;
  g.b = d.weight;
  g.c = d.z_workspace;
  g.b_transposed = false;
  return g;
}

EpilogueDesc epilogue_of(const ReconstructDesc& d) {
  EpilogueDesc e;
  e.z = d.z_workspace;
  e.bias = d.bias;
  e.theta = d.theta;
  e.position_offset = d.position_offset;
  const std::int64_t half = d.cache.shape[4] * d.cache.shape[5];
  std::int64_t column = 0;
  for (int layer : d.target_layers) {
    e.segments.push_back({column, true, cache_layer(d.cache, layer, 0)});
    e.segments.push_back({column + half, false, cache_layer(d.cache, layer, 1)});
    column += 2 * half;
  }
  return e;
}

}  // namespace kvshift::kernels
