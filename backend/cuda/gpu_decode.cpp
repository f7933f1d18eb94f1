// One decode step of a batch on a GpuModel (see gpu_model.hpp): B rows go
// through the same batched GEMMs as a prefill of B tokens; the fused epilogue
// writes each request's new K/V into slot `context` of the DecodeCache (RoPE at
// position context); attention is the causal kernel with one query per head
// against context + 1 keys, all requests in one launch through the cache's
// token-major layout. Left out: splitting the key axis across blocks
// (flash-decoding), so at small batch and long context a step is slower than
// a serving engine's and the row is an upper bound.
#include "backend/cuda/gpu_model.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::gpu {

using kernels::DType;
using kernels::TensorView;
namespace kc = kernels::cuda;

DecodeCache::DecodeCache(const cost_model::ModelSpec& spec, std::int64_t batch,
                         std::int64_t context, std::uint64_t seed, CUstream_st* stream)
    : batch_(batch), context_(context), kv_heads_(spec.kv_heads), head_dim_(spec.head_dim) {
  if (batch_ < 1) throw InputError("decode batch: must be >= 1 (got " + std::to_string(batch) + ")");
  if (context_ < 0)
    throw InputError("decode context: must be >= 0 (got " + std::to_string(context) + ")");
  const std::int64_t count =
      std::int64_t{spec.layers} * 2 * (context_ + 1) * batch_ * kv_heads_ * head_dim_;
  data_ = kc::DeviceBuffer(static_cast<std::size_t>(count) * 2);
  kc::fill_uniform({data_.view(DType::kBF16, {count}), seed, -1.0f, 1.0f}, stream);
}

TensorView DecodeCache::at(int layer, int kv, std::int64_t token,
                           std::initializer_list<std::int64_t> shape) const {
  // Element offset of (layer, kv, token, request 0, head 0, 0).
  const std::int64_t offset =
      ((std::int64_t{layer} * 2 + kv) * (context_ + 1) + token) * batch_ * kv_heads_ * head_dim_;
  return kernels::make_view(static_cast<unsigned char*>(data_.data()) + offset * 2, DType::kBF16,
                            kernels::Device::kCuda, shape);
}

TensorView DecodeCache::all_tokens(int layer, int kv) const {
  return at(layer, kv, 0, {context_ + 1, batch_ * kv_heads_, head_dim_});
}

TensorView DecodeCache::new_slot(int layer, int kv) const {
  return at(layer, kv, context_, {batch_, 1, kv_heads_, head_dim_});
}

void GpuModel::decode_step(const DecodeCache& cache) {
  const std::int64_t b = cache.batch(), d = spec_.hidden;
  if (b > max_batch_) {
    throw InputError("decode batch: " + std::to_string(b) + " exceeds the model's buffers (" +
                     std::to_string(max_batch_) + ")");
  }
  kc::embed({embedding_.view(DType::kBF16, {spec_.vocab, d}), ids_.view(DType::kI32, {b}),
             x_.view(DType::kF32, {b, d})},
            ctx_.stream());
  for (int l = 0; l < spec_.layers; ++l) decode_layer(l, cache);
  logits(0, b);
}

void GpuModel::decode_layer(int index, const DecodeCache& cache) {
  const std::int64_t b = cache.batch(), hd = spec_.head_dim, hq = spec_.q_heads,
                     hkv = spec_.kv_heads;
  CUstream_st* s = ctx_.stream();
  qkv_projection(index, b);
  // Row r of z is request r's token at position `context`: Q to q_, K/V into the new slot.
  kernels::EpilogueDesc epi;
  epi.z = qkv_.view(DType::kF32, {b, qkv_width_});
  if (spec_.attention_bias) epi.bias = layers_[index].bqkv.view(DType::kF32, {qkv_width_});
  epi.theta = spec_.rope_theta;
  epi.position_offset = cache.context();
  epi.segments = {{0, true, q_.view(DType::kBF16, {b, 1, hq, hd})},
                  {hq * hd, true, cache.new_slot(index, 0)},
                  {(hq + hkv) * hd, false, cache.new_slot(index, 1)}};
  kc::bias_rope_scatter(epi, s);
  // One query per (request, head) as a single token of b·q_heads heads; the kernel's GQA map
  // h / (q_heads / kv_heads) sends request r's head j to KV head r·kv_heads + j / group.
  kc::attention({q_.view(DType::kBF16, {1, b * hq, hd}), cache.all_tokens(index, 0),
                 cache.all_tokens(index, 1), attn_.view(DType::kBF16, {1, b * hq, hd}),
                 TensorView{}, 0},
                s);
  output_and_mlp(index, b);
}

}  // namespace kvshift::backend::gpu
