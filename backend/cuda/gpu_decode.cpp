// One decode step of a batch on a GpuModel (see gpu_model.hpp): B rows go
// through the same batched GEMMs as a prefill of B tokens; the fused epilogue
// writes each request's new K/V into slot `context` of the DecodeCache (RoPE at
// position context); attention is the causal kernel with one query per head
// against context + 1 keys, all requests in one launch through the cache's
// token-major layout. Left out: splitting the key axis across blocks
// (flash-decoding), so at small batch and long context a step is slower than
// a serving engine's and the row is an upper bound.
#include <cuda_runtime.h>

#include <stdexcept>

#include "backend/cuda/gpu_model.hpp"
#include "cost_model/input_error.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::backend::gpu {

using kernels::DType;
using kernels::TensorView;
namespace kc = kernels::cuda;

DecodeCache::DecodeCache(const cost_model::ModelSpec& spec, std::int64_t batch,
                         std::int64_t context, std::uint64_t seed, CUstream_st* stream)
    : layers_(spec.layers),
      batch_(batch),
      context_(context),
      kv_heads_(spec.kv_heads),
      head_dim_(spec.head_dim) {
  if (batch_ < 1)
    throw InputError("decode batch: must be >= 1 (got " + std::to_string(batch) + ")");
  if (context_ < 0)
    throw InputError("decode context: must be >= 0 (got " + std::to_string(context) + ")");
  const std::int64_t count =
      std::int64_t{layers_} * 2 * (context_ + 1) * batch_ * kv_heads_ * head_dim_;
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

void DecodeCache::copy_prompt(const TensorView& prefill_cache, CUstream_st* stream) {
  const TensorView& src = prefill_cache;  // [1, layers, 2, T, kv_heads, head_dim]
  if (src.rank != 6 || src.dtype != DType::kBF16 || src.shape[1] != layers_ ||
      src.shape[3] < context_ || src.shape[4] != kv_heads_ || src.shape[5] != head_dim_ ||
      src.stride[4] != head_dim_ || src.stride[3] != kv_heads_ * head_dim_) {
    throw std::invalid_argument("DecodeCache::copy_prompt: unexpected cache " + src.describe());
  }
  if (context_ == 0) return;
  const auto row = static_cast<std::size_t>(kv_heads_ * head_dim_) * 2;  // bytes of one token
  const auto requests = static_cast<std::size_t>(batch_);
  for (int l = 0; l < layers_; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const auto* from = static_cast<const unsigned char*>(src.data) +
                         (l * src.stride[1] + kv * src.stride[2]) * 2;
      auto* to = static_cast<unsigned char*>(all_tokens(l, kv).data);
      for (std::size_t b = 0; b < requests; ++b) {  // request b's rows sit `requests` apart
        KVSHIFT_CUDA_CHECK(cudaMemcpy2DAsync(to + b * row, row * requests, from, row, row,
                                             static_cast<std::size_t>(context_),
                                             cudaMemcpyDeviceToDevice, stream));
      }
    }
  }
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
  const std::int64_t b = cache.batch(), hd = spec_.head_dim, hq = spec_.q_heads;
  // Row r of z is request r's token at position `context`: Q to q_, K/V into the new slot.
  DecoderLayerPass p = layer_pass(b);
  p.scatter = {epilogue(
      index, b,
      {q_.view(DType::kBF16, {b, 1, hq, hd}), cache.new_slot(index, 0), cache.new_slot(index, 1)},
      cache.context())};
  // One query per (request, head) as a single token of b·q_heads heads; the kernel's GQA map
  // h / (q_heads / kv_heads) sends request r's head j to KV head r·kv_heads + j / group.
  p.attention = {{q_.view(DType::kBF16, {1, b * hq, hd}), cache.all_tokens(index, 0),
                  cache.all_tokens(index, 1), attn_.view(DType::kBF16, {1, b * hq, hd}),
                  TensorView{}, 0}};
  run_decoder_layer(kc::Ops{ctx_}, layer_weights(index, b), p, [] {});
}

}  // namespace kvshift::backend::gpu
