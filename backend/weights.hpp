// Weights of a Llama-family decoder (Llama, Qwen2, TinyLlama, SmolLM2, Gemma 3)
// in fp32, loaded from a Hugging Face folder (config.json + model.safetensors or a
// sharded model.safetensors.index.json; tied embeddings; Qwen2 q/k/v biases;
// Gemma 3's extra norms, each stored as 1 + w so every norm multiplies by its weight)
// or drawn from a seed for any ModelSpec. Every tensor's shape is checked
// against the config; a mismatch names the tensor and the expected shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/tensor.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend {

/// One decoder layer. Linear weights are [out, in] as in the checkpoint.
struct LayerWeights {
  Vector attn_norm;      ///< [hidden]
  Matrix wq;             ///< [q_heads·head_dim, hidden]
  Matrix wk;             ///< [kv_heads·head_dim, hidden]
  Matrix wv;             ///< [kv_heads·head_dim, hidden]
  Matrix wo;             ///< [hidden, q_heads·head_dim]
  RowVector bq, bk, bv;  ///< empty unless spec.attention_bias
  Vector mlp_norm;       ///< [hidden]
  Matrix w_gate;         ///< [intermediate, hidden]
  Matrix w_up;           ///< [intermediate, hidden]
  Matrix w_down;         ///< [hidden, intermediate]
  // Gemma 3 only (empty otherwise):
  Vector q_norm, k_norm;                 ///< [head_dim], per-head RMSNorm before RoPE
  Vector post_attn_norm, post_mlp_norm;  ///< [hidden], on the attention / MLP output
};

struct ModelWeights {
  cost_model::ModelSpec spec;
  Matrix embed;  ///< [vocab, hidden]
  std::vector<LayerWeights> layers;
  Vector final_norm;  ///< [hidden]
  Matrix lm_head;     ///< [vocab, hidden]; empty when tied to `embed`
  /// The output projection actually used (lm_head, or embed when tied).
  const Matrix& output() const { return lm_head.size() ? lm_head : embed; }
};

/// Loads a Hugging Face folder: config.json via input::resolve_model, then the
/// safetensors (single file or sharded index). Throws InputError.
ModelWeights load_hf_model(const std::string& folder);

/// The first `k` decoder layers of `w` (a real, cheaper model of the same family: the ProxyKV
/// proxy by default). Embedding, final norm and head are kept; spec.layers becomes k and the
/// name gains "[:k]" ("SmolLM2-135M-Instruct[:8]"). InputError naming --proxy-layers unless
/// 1 <= k < layers.
ModelWeights truncate_layers(ModelWeights w, int k);
/// The spec of truncate_layers(w, k) for a model of `spec` (the same checks).
cost_model::ModelSpec truncated_spec(cost_model::ModelSpec spec, int k);

/// Seeded random weights for `spec` (scaled like an initialised model: N(0, 1/in)).
/// Deterministic for a given (spec, seed).
ModelWeights random_weights(const cost_model::ModelSpec& spec, std::uint64_t seed);

}  // namespace kvshift::backend
