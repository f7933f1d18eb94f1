// GpuModel: buffers, seeded weights and the prefill forward (see gpu_model.hpp).
// Checkpoint weights are uploaded in gpu_model_weights.cpp, the decode step is
// in gpu_decode.cpp.
#include "backend/cuda/gpu_model.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "cost_model/input_error.hpp"

namespace kvshift::backend::gpu {
namespace {

using kernels::DType;
using kernels::TensorView;
namespace kc = kernels::cuda;

/// Column slice [begin, begin + count) of a 2-D view, keeping the row stride.
TensorView columns(const TensorView& v, std::int64_t begin, std::int64_t count) {
  return kernels::slice(v, 1, begin, count);
}

}  // namespace

GpuModel::GpuModel(const cost_model::ModelSpec& spec, GpuModelSize size, const kc::Context& ctx)
    : spec_(spec), ctx_(ctx), max_tokens_(size.max_tokens), max_batch_(size.max_batch) {
  cost_model::validate(spec_);
  if (spec_.gemma) {
    throw InputError("model " + spec_.name +
                     ": Gemma 3 (sliding windows, QK norm, GeGLU) runs on the CPU backend only; "
                     "the CUDA backend runs Llama-family models");
  }
  if (spec_.head_dim != 64 && spec_.head_dim != 128) {
    throw InputError("model " + spec_.name +
                     ": head_dim must be 64 or 128 for the CUDA backend (got " +
                     std::to_string(spec_.head_dim) + ")");
  }
  if (max_tokens_ < 1) throw InputError("tokens: must be >= 1");
  if (max_batch_ < 0) throw InputError("decode batch: must be >= 0");
  max_rows_ = std::max(max_tokens_, max_batch_);
  qkv_width_ = (spec_.q_heads + 2LL * spec_.kv_heads) * spec_.head_dim;
}

GpuModel::GpuModel(const cost_model::ModelSpec& spec, std::uint64_t seed, GpuModelSize size,
                   const kc::Context& ctx)
    : GpuModel(spec, size, ctx) {
  seed_ = seed;
  const std::int64_t d = spec_.hidden, hd = spec_.head_dim, inter = spec_.intermediate;
  const float in_d = std::sqrt(3.0f / static_cast<float>(d));
  for (int l = 0; l < spec_.layers; ++l) {
    Layer layer;
    layer.wqkv = random_buffer(DType::kBF16, qkv_width_ * d, in_d);
    if (spec_.attention_bias) layer.bqkv = random_buffer(DType::kF32, qkv_width_, 0.1f);
    layer.wo = random_buffer(DType::kBF16, d * spec_.q_heads * hd,
                             std::sqrt(3.0f / static_cast<float>(spec_.q_heads * hd)));
    layer.ln1 = random_buffer(DType::kF32, d, 1.0f);
    layer.ln2 = random_buffer(DType::kF32, d, 1.0f);
    layer.wgu = random_buffer(DType::kBF16, 2 * inter * d, in_d);
    layer.wd = random_buffer(DType::kBF16, d * inter, std::sqrt(3.0f / static_cast<float>(inter)));
    layers_.push_back(std::move(layer));
  }
  embedding_ = random_buffer(DType::kBF16, spec_.vocab * d, 1.0f);
  final_norm_ = random_buffer(DType::kF32, d, 1.0f);
  if (!spec_.tied_embeddings) lm_head_ = random_buffer(DType::kBF16, spec_.vocab * d, in_d);
  allocate_activations();
}

void GpuModel::allocate_activations() {
  const std::int64_t d = spec_.hidden, hd = spec_.head_dim, inter = spec_.intermediate;
  const std::int64_t r = max_rows_, t = max_tokens_;
  std::vector<std::int32_t> ids(r);
  std::mt19937_64 rng(seed_ ^ 0x5EEDull);
  std::uniform_int_distribution<std::int32_t> pick(0, spec_.vocab - 1);
  for (auto& id : ids) id = pick(rng);
  ids_ = kc::DeviceBuffer(ids.size() * sizeof(std::int32_t));
  ids_.upload(ids.data(), ids.size() * sizeof(std::int32_t));

  x_ = kc::DeviceBuffer(r * d * 4);
  h_ = kc::DeviceBuffer(r * d * 2);
  qkv_ = kc::DeviceBuffer(r * qkv_width_ * 4);
  q_ = kc::DeviceBuffer(r * spec_.q_heads * hd * 2);
  attn_ = kc::DeviceBuffer(r * spec_.q_heads * hd * 2);
  gu_ = kc::DeviceBuffer(r * 2 * inter * 2);
  act_ = kc::DeviceBuffer(r * inter * 2);
  lse_ = kc::DeviceBuffer(t * spec_.q_heads * 4);
  logits_ = kc::DeviceBuffer(std::max<std::int64_t>(1, max_batch_) * spec_.vocab * 4);
  cache_ =
      kc::DeviceBuffer(static_cast<std::size_t>(spec_.layers) * 2 * t * spec_.kv_heads * hd * 2);
  features_ = kc::DeviceBuffer(static_cast<std::size_t>(spec_.layers) * spec_.q_heads * t * 4);
}

kc::DeviceBuffer GpuModel::random_buffer(DType dtype, std::int64_t count, float bound) {
  kc::DeviceBuffer b(static_cast<std::size_t>(count) * kernels::dtype_size(dtype));
  kc::fill_uniform({b.view(dtype, {count}), seed_++, -bound, bound}, ctx_.stream());
  return b;
}

TensorView GpuModel::cache(std::int64_t tokens) const {
  TensorView v =
      cache_.view(DType::kBF16, {1, spec_.layers, 2, max_tokens_, spec_.kv_heads, spec_.head_dim});
  return kernels::slice(v, 3, 0, tokens);
}

TensorView GpuModel::features(std::int64_t tokens) const {
  return features_.view(DType::kF32,
                        {static_cast<std::int64_t>(spec_.layers) * spec_.q_heads, tokens});
}

void GpuModel::set_token_ids(std::span<const std::int32_t> ids) {
  if (static_cast<std::int64_t>(ids.size()) > max_rows_)
    throw InputError("token ids: more than the model's " + std::to_string(max_rows_) + " rows");
  for (std::int32_t id : ids) {
    if (id < 0 || id >= spec_.vocab)
      throw InputError("token ids: " + std::to_string(id) + " outside the vocabulary");
  }
  kc::device_synchronize();  // no launch still reads the old ids
  ids_.upload(ids.data(), ids.size() * sizeof(std::int32_t));
  kc::device_synchronize();  // a pageable upload may still be in flight on return
}

std::vector<float> GpuModel::copy_logits(std::int64_t rows) const {
  if (rows < 1 || rows > std::max<std::int64_t>(1, max_batch_))
    throw InputError("logits: " + std::to_string(rows) + " rows asked for");
  std::vector<float> out(static_cast<std::size_t>(rows * spec_.vocab));
  ctx_.synchronize();
  logits_.download(out.data(), out.size() * sizeof(float));
  return out;
}

void GpuModel::prefill(std::int64_t tokens, bool attention_mass) {
  if (tokens < 1 || tokens > max_tokens_) {
    throw InputError("tokens: " + std::to_string(tokens) + " outside [1, " +
                     std::to_string(max_tokens_) + "]");
  }
  const std::int64_t d = spec_.hidden;
  kc::embed({embedding_.view(DType::kBF16, {spec_.vocab, d}), ids_.view(DType::kI32, {tokens}),
             x_.view(DType::kF32, {tokens, d})},
            ctx_.stream());
  for (int l = 0; l < spec_.layers; ++l) layer_forward(l, tokens, attention_mass);
  logits(tokens - 1, 1);  // replay needs the last token's logits only
}

void GpuModel::logits(std::int64_t first_row, std::int64_t rows) {
  const std::int64_t d = spec_.hidden;
  const kc::DeviceBuffer& head = lm_head_.data() ? lm_head_ : embedding_;
  run_decoder_head(kc::Ops{ctx_}, final_norm_.view(DType::kF32, {d}),
                   head.view(DType::kBF16, {spec_.vocab, d}),
                   kernels::slice(x_.view(DType::kF32, {max_rows_, d}), 0, first_row, rows),
                   h_.view(DType::kBF16, {rows, d}), logits_.view(DType::kF32, {rows, spec_.vocab}),
                   static_cast<float>(spec_.rms_eps));
}

DecoderLayerWeights GpuModel::layer_weights(int index, std::int64_t rows) const {
  const Layer& w = layers_[index];
  const std::int64_t d = spec_.hidden, qd = std::int64_t{spec_.q_heads} * spec_.head_dim;
  const std::int64_t inter = spec_.intermediate;
  // Fused: one GEMM for q|k|v, one for gate|up.
  return {.attn_norm = w.ln1.view(DType::kF32, {d}),
          .mlp_norm = w.ln2.view(DType::kF32, {d}),
          .qkv = {{w.wqkv.view(DType::kBF16, {qkv_width_, d}),
                   qkv_.view(DType::kF32, {rows, qkv_width_})}},
          .wo = w.wo.view(DType::kBF16, {d, qd}),
          .gate_up = {{w.wgu.view(DType::kBF16, {2 * inter, d}),
                       gu_.view(DType::kBF16, {rows, 2 * inter})}},
          .w_down = w.wd.view(DType::kBF16, {d, inter})};
}

DecoderLayerPass GpuModel::layer_pass(std::int64_t rows) const {
  const std::int64_t d = spec_.hidden, qd = std::int64_t{spec_.q_heads} * spec_.head_dim;
  const std::int64_t inter = spec_.intermediate;
  DecoderLayerPass p;
  p.x = x_.view(DType::kF32, {rows, d});
  p.h = h_.view(DType::kBF16, {rows, d});
  p.attn = attn_.view(DType::kBF16, {rows, qd});
  const TensorView gu = gu_.view(DType::kBF16, {rows, 2 * inter});
  p.gate = columns(gu, 0, inter);
  p.up = columns(gu, inter, inter);
  p.act = act_.view(DType::kBF16, {rows, inter});
  p.eps = static_cast<float>(spec_.rms_eps);
  return p;
}

kernels::EpilogueDesc GpuModel::epilogue(int index, std::int64_t rows,
                                         std::array<TensorView, 3> qkv,
                                         std::int64_t position) const {
  const std::int64_t hq = spec_.q_heads, hkv = spec_.kv_heads, hd = spec_.head_dim;
  kernels::EpilogueDesc epi;
  epi.z = qkv_.view(DType::kF32, {rows, qkv_width_});
  if (spec_.attention_bias) epi.bias = layers_[index].bqkv.view(DType::kF32, {qkv_width_});
  epi.theta = spec_.rope_theta;
  epi.position_offset = position;
  epi.segments = {{0, true, qkv[0]}, {hq * hd, true, qkv[1]}, {(hq + hkv) * hd, false, qkv[2]}};
  return epi;
}

void GpuModel::layer_forward(int index, std::int64_t tokens, bool attention_mass) {
  const std::int64_t hd = spec_.head_dim, hq = spec_.q_heads, hkv = spec_.kv_heads;
  const TensorView cache = cache_.view(DType::kBF16, {1, spec_.layers, 2, max_tokens_, hkv, hd});
  TensorView k_layer = kernels::cache_layer(cache, index, 0),
             v_layer = kernels::cache_layer(cache, index, 1);
  k_layer.shape[1] = v_layer.shape[1] = tokens;  // [1, tokens, kv_heads, head_dim]
  const auto as3 = [&](TensorView v) {           // [1, T, H, D] -> [T, H, D]
    v.rank = 3;
    v.shape = {v.shape[1], v.shape[2], v.shape[3], 0, 0, 0};
    v.stride = {v.stride[1], v.stride[2], v.stride[3], 0, 0, 0};
    return v;
  };
  // Q to q_, K/V into the cache; every token attends to the prompt's keys up to its own.
  DecoderLayerPass p = layer_pass(tokens);
  p.scatter = {
      epilogue(index, tokens, {q_.view(DType::kBF16, {1, tokens, hq, hd}), k_layer, v_layer}, 0)};
  const TensorView q3 = q_.view(DType::kBF16, {tokens, hq, hd});
  const TensorView lse = lse_.view(DType::kF32, {tokens, hq});
  p.attention = {{q3, as3(k_layer), as3(v_layer), attn_.view(DType::kBF16, {tokens, hq, hd}),
                  attention_mass ? lse : TensorView{}, 0}};
  if (attention_mass) {
    p.masses = {{q3, as3(k_layer), lse, kernels::slice(features(tokens), 0, index * hq, hq), 0, 0}};
  }
  run_decoder_layer(kc::Ops{ctx_}, layer_weights(index, tokens), p, [] {});
}

}  // namespace kvshift::backend::gpu
