// GpuModel: a Llama-family decoder (Llama, Qwen2 with q/k/v biases, TinyLlama,
// SmolLM2) on the GPU with seeded random bf16 weights, for timing prefill
// (token replay) and proxy scoring at real shapes. Residual stream in fp32,
// GEMM inputs and the KV cache in bf16, cuBLAS GEMMs with fp32 accumulation,
// the kernels/ ops for everything else. Only the last token's logits are
// computed (what replay needs). Loading real checkpoints is the CPU backend's
// job; this class exists to measure time, not to produce text.
#pragma once

#include <cstdint>
#include <vector>

#include "cost_model/model_spec.hpp"
#include "kernels/cuda.hpp"

namespace kvshift::backend::gpu {

class GpuModel {
 public:
  /// Allocates weights (filled on the device from `seed`) and buffers for up to `max_tokens`.
  GpuModel(const cost_model::ModelSpec& spec, std::uint64_t seed, std::int64_t max_tokens,
           const kernels::cuda::Context& ctx);

  /// Enqueues a prefill of the first `tokens` token ids on the context's stream, writing the
  /// KV cache. With `attention_mass`, also the per-layer, per-head attention mass each key
  /// receives ([layers * q_heads, tokens] f32, ProxyKV's proxy features).
  void prefill(std::int64_t tokens, bool attention_mass);

  const cost_model::ModelSpec& spec() const { return spec_; }
  /// KV cache [1, layers, 2, max_tokens, kv_heads, head_dim] bf16; the first `tokens` rows are
  /// valid.
  kernels::TensorView cache(std::int64_t tokens) const;
  /// Attention-mass features of the last prefill that asked for them.
  kernels::TensorView features(std::int64_t tokens) const;

 private:
  struct Layer {
    kernels::cuda::DeviceBuffer wqkv, bqkv, wo, ln1, ln2, wgu, wd;
  };
  void layer_forward(int index, std::int64_t tokens, bool attention_mass);
  kernels::cuda::DeviceBuffer random_buffer(kernels::DType dtype, std::int64_t count, float bound);

  cost_model::ModelSpec spec_;
  const kernels::cuda::Context& ctx_;
  std::uint64_t seed_;
  std::int64_t max_tokens_;
  std::int64_t qkv_width_;
  std::vector<Layer> layers_;
  kernels::cuda::DeviceBuffer embedding_, final_norm_, lm_head_, ids_;
  kernels::cuda::DeviceBuffer x_, h_, qkv_, q_, attn_, gu_, act_, lse_, logits_, cache_, features_;
};

}  // namespace kvshift::backend::gpu
