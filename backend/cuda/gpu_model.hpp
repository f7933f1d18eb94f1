// GpuModel: a Llama-family decoder (Llama, Qwen2 with q/k/v biases, TinyLlama,
// SmolLM2) on the GPU, for timing prefill (token replay), a decode step and
// proxy scoring at real shapes. Its weights are a checkpoint's (ModelWeights,
// rounded fp32 -> bf16 on the host and uploaded) or drawn on the device from a
// seed. Residual stream in fp32, GEMM inputs and the KV cache in bf16, cuBLAS
// GEMMs with fp32 accumulation, the kernels/ ops for everything else; each
// layer and the head are the decoder program (backend/decoder_program.hpp, the
// one the CPU model runs on the CPU twins). Prefill
// computes only the last token's logits (what replay needs); a decode step
// computes every request's. Token ids are seeded: dense ops do the same work
// for any ids. This class exists to measure time, not to produce text.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/decoder_program.hpp"
#include "cost_model/model_spec.hpp"
#include "kernels/cuda.hpp"

namespace kvshift::backend {
struct ModelWeights;
}

namespace kvshift::backend::gpu {

/// What a GpuModel's activation buffers must hold.
struct GpuModelSize {
  std::int64_t max_tokens = 1;  ///< longest prefill (and its KV cache)
  std::int64_t max_batch = 0;   ///< most requests in one decode step (0: no decode)
};

/// KV cache of one decode batch: `batch` requests with `context` cached tokens each, plus the
/// slot the step writes. Layout [layers, 2, context + 1, batch, kv_heads, head_dim] bf16:
/// token-major with the requests side by side, so one attention launch serves every request
/// (request b's KV head h is head b·kv_heads + h of a [context + 1, batch·kv_heads, head_dim]
/// view, and its query head j is head b·q_heads + j). Filled with seeded values: attention
/// does the same work for any keys.
class DecodeCache {
 public:
  DecodeCache(const cost_model::ModelSpec& spec, std::int64_t batch, std::int64_t context,
              std::uint64_t seed, CUstream_st* stream);
  std::int64_t batch() const { return batch_; }
  std::int64_t context() const { return context_; }
  /// Layer `layer`'s K (kv = 0) or V (kv = 1) of all requests: [context + 1, batch·kv_heads, hd].
  kernels::TensorView all_tokens(int layer, int kv) const;
  /// Where the step writes its token's K or V: [batch, 1, kv_heads, head_dim] at slot `context`.
  kernels::TensorView new_slot(int layer, int kv) const;
  /// Copies the first `context` tokens of a prefill cache ([1, layers, 2, T, kv_heads,
  /// head_dim], GpuModel::cache) into every request (tests: a step then continues that prompt).
  void copy_prompt(const kernels::TensorView& prefill_cache, CUstream_st* stream);

 private:
  kernels::TensorView at(int layer, int kv, std::int64_t token,
                         std::initializer_list<std::int64_t> shape) const;
  int layers_;
  std::int64_t batch_, context_, kv_heads_, head_dim_;
  kernels::cuda::DeviceBuffer data_;
};

class GpuModel {
 public:
  /// Seeded random weights, filled on the device from `seed`.
  GpuModel(const cost_model::ModelSpec& spec, std::uint64_t seed, GpuModelSize size,
           const kernels::cuda::Context& ctx);
  /// A checkpoint's weights (fused q|k|v and gate|up; a tied head reads the embedding).
  GpuModel(const ModelWeights& weights, GpuModelSize size, const kernels::cuda::Context& ctx);

  /// Enqueues a prefill of the first `tokens` token ids on the context's stream, writing the
  /// KV cache. With `attention_mass`, also the per-layer, per-head attention mass each key
  /// receives ([layers * q_heads, tokens] f32, ProxyKV's proxy features).
  void prefill(std::int64_t tokens, bool attention_mass);
  /// Enqueues one decode step: every request of `cache` feeds one token at position
  /// context, writes its K/V into the cache's new slot and gets its logits.
  void decode_step(const DecodeCache& cache);

  const cost_model::ModelSpec& spec() const { return spec_; }
  /// Prefill KV cache [1, layers, 2, max_tokens, kv_heads, head_dim] bf16; the first `tokens`
  /// rows are valid.
  kernels::TensorView cache(std::int64_t tokens) const;
  /// Attention-mass features of the last prefill that asked for them.
  kernels::TensorView features(std::int64_t tokens) const;
  /// Replaces the first ids.size() token ids (seeded by default) that prefill and decode read;
  /// waits for the device before and after.
  void set_token_ids(std::span<const std::int32_t> ids);
  /// Logits of the last call, [rows, vocab] row-major (prefill: 1 row; decode: batch rows);
  /// waits for the model's stream.
  std::vector<float> copy_logits(std::int64_t rows) const;

 private:
  struct Layer {
    kernels::cuda::DeviceBuffer wqkv, bqkv, wo, ln1, ln2, wgu, wd;
  };
  GpuModel(const cost_model::ModelSpec& spec, GpuModelSize size, const kernels::cuda::Context& ctx);
  void allocate_activations();
  void upload_layer(const ModelWeights& weights, int index);
  void layer_forward(int index, std::int64_t tokens, bool attention_mass);
  void decode_layer(int index, const DecodeCache& cache);
  /// Layer `index`'s fused weights as the decoder program reads them, for `rows` rows.
  DecoderLayerWeights layer_weights(int index, std::int64_t rows) const;
  /// The activation buffers of a pass of `rows` rows (the scatter and attention are the
  /// caller's: prefill and decode lay out their KV differently).
  DecoderLayerPass layer_pass(std::int64_t rows) const;
  /// z's q|k|v to `qkv` with layer `index`'s bias and RoPE, the first row at `position`.
  kernels::EpilogueDesc epilogue(int index, std::int64_t rows,
                                 std::array<kernels::TensorView, 3> qkv,
                                 std::int64_t position) const;
  void logits(std::int64_t first_row, std::int64_t rows);
  kernels::cuda::DeviceBuffer random_buffer(kernels::DType dtype, std::int64_t count, float bound);

  cost_model::ModelSpec spec_;
  const kernels::cuda::Context& ctx_;
  std::uint64_t seed_ = 0;
  std::int64_t max_tokens_;
  std::int64_t max_batch_;
  std::int64_t max_rows_;  ///< activation rows: max(max_tokens, max_batch)
  std::int64_t qkv_width_;
  std::vector<Layer> layers_;
  kernels::cuda::DeviceBuffer embedding_, final_norm_, lm_head_, ids_;
  kernels::cuda::DeviceBuffer x_, h_, qkv_, q_, attn_, gu_, act_, lse_, logits_, cache_, features_;
};

}  // namespace kvshift::backend::gpu
