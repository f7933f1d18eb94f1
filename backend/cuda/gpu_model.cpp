// GpuModel: weights, buffers and the prefill forward (see gpu_model.hpp).
#include "backend/cuda/gpu_model.hpp"

#include <cmath>
#include <random>

#include "cost_model/input_error.hpp"

namespace kvshift::backend::gpu {
namespace {

using kernels::DType;
using kernels::TensorView;
namespace kc = kernels::cuda;

/// Row slice [begin, begin + count) of a 2-D view, keeping the row stride.
TensorView columns(const TensorView& v, std::int64_t begin, std::int64_t count) {
  return kernels::slice(v, 1, begin, count);
}

}  // namespace

GpuModel::GpuModel(const cost_model::ModelSpec& spec, std::uint64_t seed, std::int64_t max_tokens,
                   const kc::Context& ctx)
    : spec_(spec), ctx_(ctx), seed_(seed), max_tokens_(max_tokens) {
  cost_model::validate(spec_);
  if (spec_.head_dim != 64 && spec_.head_dim != 128) {
    throw InputError("model " + spec_.name +
                     ": head_dim must be 64 or 128 for the CUDA backend (got " +
                     std::to_string(spec_.head_dim) + ")");
  }
  if (max_tokens_ < 1) throw InputError("tokens: must be >= 1");
  const std::int64_t d = spec_.hidden, hd = spec_.head_dim, inter = spec_.intermediate;
  qkv_width_ = (spec_.q_heads + 2LL * spec_.kv_heads) * hd;
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

  const std::int64_t t = max_tokens_;
  std::vector<std::int32_t> ids(t);
  std::mt19937_64 rng(seed_ ^ 0x5EEDull);
  std::uniform_int_distribution<std::int32_t> pick(0, spec_.vocab - 1);
  for (auto& id : ids) id = pick(rng);
  ids_ = kc::DeviceBuffer(ids.size() * sizeof(std::int32_t));
  ids_.upload(ids.data(), ids.size() * sizeof(std::int32_t));

  x_ = kc::DeviceBuffer(t * d * 4);
  h_ = kc::DeviceBuffer(t * d * 2);
  qkv_ = kc::DeviceBuffer(t * qkv_width_ * 4);
  q_ = kc::DeviceBuffer(t * spec_.q_heads * hd * 2);
  attn_ = kc::DeviceBuffer(t * spec_.q_heads * hd * 2);
  gu_ = kc::DeviceBuffer(t * 2 * inter * 2);
  act_ = kc::DeviceBuffer(t * inter * 2);
  lse_ = kc::DeviceBuffer(t * spec_.q_heads * 4);
  logits_ = kc::DeviceBuffer(spec_.vocab * 4);
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

void GpuModel::prefill(std::int64_t tokens, bool attention_mass) {
  if (tokens < 1 || tokens > max_tokens_) {
    throw InputError("tokens: " + std::to_string(tokens) + " outside [1, " +
                     std::to_string(max_tokens_) + "]");
  }
  const std::int64_t d = spec_.hidden;
  CUstream_st* s = ctx_.stream();
  const TensorView x = x_.view(DType::kF32, {tokens, d});
  kc::embed({embedding_.view(DType::kBF16, {spec_.vocab, d}), ids_.view(DType::kI32, {tokens}), x},
            s);
  for (int l = 0; l < spec_.layers; ++l) layer_forward(l, tokens, attention_mass);
  // Last token only: final norm, then logits against the (tied or separate) head.
  const TensorView last = kernels::slice(x, 0, tokens - 1, 1);
  const TensorView h_last = h_.view(DType::kBF16, {1, d});
  kc::rms_norm(
      {last, final_norm_.view(DType::kF32, {d}), h_last, static_cast<float>(spec_.rms_eps)}, s);
  const kc::DeviceBuffer& head = spec_.tied_embeddings ? embedding_ : lm_head_;
  kc::gemm({h_last, head.view(DType::kBF16, {spec_.vocab, d}),
            logits_.view(DType::kF32, {1, spec_.vocab})},
           ctx_);
}

void GpuModel::layer_forward(int index, std::int64_t tokens, bool attention_mass) {
  const Layer& w = layers_[index];
  const std::int64_t d = spec_.hidden, hd = spec_.head_dim, hq = spec_.q_heads,
                     hkv = spec_.kv_heads;
  const std::int64_t inter = spec_.intermediate;
  const float eps = static_cast<float>(spec_.rms_eps);
  CUstream_st* s = ctx_.stream();
  const TensorView x = x_.view(DType::kF32, {tokens, d});
  const TensorView h = h_.view(DType::kBF16, {tokens, d});
  const TensorView qkv = qkv_.view(DType::kF32, {tokens, qkv_width_});
  const TensorView cache = cache_.view(DType::kBF16, {1, spec_.layers, 2, max_tokens_, hkv, hd});
  TensorView k_layer = kernels::cache_layer(cache, index, 0),
             v_layer = kernels::cache_layer(cache, index, 1);
  k_layer.shape[1] = v_layer.shape[1] = tokens;  // [1, tokens, kv_heads, head_dim]

  // Attention block: norm -> fused QKV GEMM -> bias + RoPE + scatter (Q to q_, K/V to the cache).
  kc::rms_norm({x, w.ln1.view(DType::kF32, {d}), h, eps}, s);
  kc::gemm({h, w.wqkv.view(DType::kBF16, {qkv_width_, d}), qkv}, ctx_);
  kernels::EpilogueDesc epi;
  epi.z = qkv;
  if (spec_.attention_bias) epi.bias = w.bqkv.view(DType::kF32, {qkv_width_});
  epi.theta = spec_.rope_theta;
  epi.segments = {{0, true, q_.view(DType::kBF16, {1, tokens, hq, hd})},
                  {hq * hd, true, k_layer},
                  {(hq + hkv) * hd, false, v_layer}};
  kc::bias_rope_scatter(epi, s);
  const auto as3 = [&](TensorView v) {  // [1, T, H, D] -> [T, H, D]
    v.rank = 3;
    v.shape = {v.shape[1], v.shape[2], v.shape[3], 0, 0, 0};
    v.stride = {v.stride[1], v.stride[2], v.stride[3], 0, 0, 0};
    return v;
  };
  const TensorView q3 = q_.view(DType::kBF16, {tokens, hq, hd});
  const TensorView lse = lse_.view(DType::kF32, {tokens, hq});
  kc::attention({q3, as3(k_layer), as3(v_layer), attn_.view(DType::kBF16, {tokens, hq, hd}),
                 attention_mass ? lse : TensorView{}, 0},
                s);
  if (attention_mass) {
    const TensorView all = features(tokens);
    kc::attention_mass({q3, as3(k_layer), lse, kernels::slice(all, 0, index * hq, hq), 0, 0}, s);
  }
  kc::gemm({attn_.view(DType::kBF16, {tokens, hq * hd}), w.wo.view(DType::kBF16, {d, hq * hd}), x,
            true, 1.0f, 1.0f},
           ctx_);

  // MLP block: norm -> gate|up GEMM -> SwiGLU -> down GEMM accumulated into the residual.
  kc::rms_norm({x, w.ln2.view(DType::kF32, {d}), h, eps}, s);
  const TensorView gu = gu_.view(DType::kBF16, {tokens, 2 * inter});
  kc::gemm({h, w.wgu.view(DType::kBF16, {2 * inter, d}), gu}, ctx_);
  const TensorView act = act_.view(DType::kBF16, {tokens, inter});
  kc::swiglu({columns(gu, 0, inter), columns(gu, inter, inter), act}, s);
  kc::gemm({act, w.wd.view(DType::kBF16, {d, inter}), x, true, 1.0f, 1.0f}, ctx_);
}

}  // namespace kvshift::backend::gpu
