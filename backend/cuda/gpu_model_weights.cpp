// GpuModel from a checkpoint's ModelWeights: every fp32 matrix is rounded to
// bf16 on the host and uploaded in the layouts the forward uses — q|k|v stacked
// into one [qkv_width, hidden] weight (and one f32 bias), gate|up into one
// [2·intermediate, hidden] weight — with norms in f32. A tied model keeps only
// the embedding, which the head then reads. Shapes are checked against the
// weights' own spec first, so a mismatch names the tensor instead of reading
// past an allocation.
#include <span>

#include "backend/cuda/gpu_model.hpp"
#include "backend/cuda/host_upload.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::gpu {
namespace {

using kernels::DType;

template <typename M>
std::span<const float> values(const M& m) {
  return {m.data(), static_cast<std::size_t>(m.size())};
}

template <typename M>
void check_shape(const std::string& name, const M& m, std::int64_t rows, std::int64_t cols) {
  if (m.rows() != rows || m.cols() != cols) {
    throw InputError("GPU model weights: " + name + " is [" + std::to_string(m.rows()) + ", " +
                     std::to_string(m.cols()) + "], expected [" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "]");
  }
}

}  // namespace

GpuModel::GpuModel(const ModelWeights& weights, GpuModelSize size,
                   const kernels::cuda::Context& ctx)
    : GpuModel(weights.spec, size, ctx) {
  const std::int64_t d = spec_.hidden;
  if (static_cast<int>(weights.layers.size()) != spec_.layers) {
    throw InputError("GPU model weights: " + std::to_string(weights.layers.size()) +
                     " layers, the spec says " + std::to_string(spec_.layers));
  }
  check_shape("embed", weights.embed, spec_.vocab, d);
  check_shape("final_norm", weights.final_norm, d, 1);
  for (int l = 0; l < spec_.layers; ++l) upload_layer(weights, l);
  embedding_ = upload_as(DType::kBF16, {values(weights.embed)});
  final_norm_ = upload_as(DType::kF32, {values(weights.final_norm)});
  if (weights.lm_head.size() != 0) {
    check_shape("lm_head", weights.lm_head, spec_.vocab, d);
    lm_head_ = upload_as(DType::kBF16, {values(weights.lm_head)});
  }
  allocate_activations();
}

void GpuModel::upload_layer(const ModelWeights& weights, int index) {
  const LayerWeights& w = weights.layers[index];
  const std::int64_t d = spec_.hidden, inter = spec_.intermediate;
  const std::int64_t qd = std::int64_t{spec_.q_heads} * spec_.head_dim;
  const std::int64_t kvd = std::int64_t{spec_.kv_heads} * spec_.head_dim;
  const std::string at = "layers." + std::to_string(index) + ".";
  check_shape(at + "wq", w.wq, qd, d);
  check_shape(at + "wk", w.wk, kvd, d);
  check_shape(at + "wv", w.wv, kvd, d);
  check_shape(at + "wo", w.wo, d, qd);
  check_shape(at + "w_gate", w.w_gate, inter, d);
  check_shape(at + "w_up", w.w_up, inter, d);
  check_shape(at + "w_down", w.w_down, d, inter);
  check_shape(at + "attn_norm", w.attn_norm, d, 1);
  check_shape(at + "mlp_norm", w.mlp_norm, d, 1);
  Layer layer;
  layer.wqkv = upload_as(DType::kBF16, {values(w.wq), values(w.wk), values(w.wv)});
  if (spec_.attention_bias) {
    check_shape(at + "bq", w.bq, 1, qd);
    check_shape(at + "bk", w.bk, 1, kvd);
    check_shape(at + "bv", w.bv, 1, kvd);
    layer.bqkv = upload_as(DType::kF32, {values(w.bq), values(w.bk), values(w.bv)});
  }
  layer.wo = upload_as(DType::kBF16, {values(w.wo)});
  layer.ln1 = upload_as(DType::kF32, {values(w.attn_norm)});
  layer.ln2 = upload_as(DType::kF32, {values(w.mlp_norm)});
  layer.wgu = upload_as(DType::kBF16, {values(w.w_gate), values(w.w_up)});
  layer.wd = upload_as(DType::kBF16, {values(w.w_down)});
  layers_.push_back(std::move(layer));
}

}  // namespace kvshift::backend::gpu
