// ModelSpec: the shape of a Llama-family decoder (Llama, Qwen2, TinyLlama,
// SmolLM2; Gemma 3's variant, `gemma`) as far as KV accounting, predictors and
// roofline costs need it, and the registry of the models kvshift knows by name.
// Loading a Hugging Face config.json lives in scenarios/ (it needs a JSON
// parser; this folder is pure).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvshift::cost_model {

/// Element type of a tensor (KV cache, predictor, weights).
enum class DType { kF32, kF16, kBF16 };

/// Bytes per element of `t`.
constexpr int dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }
/// "fp32", "fp16", "bf16".
std::string_view dtype_name(DType t);
/// Inverse of dtype_name (also accepts "float32", "float16", "bfloat16"); throws InputError.
DType parse_dtype(std::string_view text, std::string_view field);

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;  ///< d: residual stream width
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;  ///< SwiGLU inner width
  int vocab = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool attention_bias = false;  ///< Qwen2 has biases on q/k/v projections
  bool tied_embeddings = false;
  DType kv_dtype = DType::kF16;
  DType weight_dtype = DType::kBF16;

  /// Gemma 3's decoder (model_type gemma3_text): embeddings scaled by √hidden, RMSNorm weights
  /// applied as 1 + w, per-head RMSNorm of queries and keys before RoPE, norms after attention
  /// and after the MLP as well as before, GELU (tanh) gating, scores scaled by
  /// query_pre_attn_scalar^-½, and sliding-window layers.
  bool gemma = false;
  double query_scale = 0;  ///< scores scaled by this (0: 1/√head_dim)
  int sliding_window = 0;  ///< keys a sliding layer's query sees, itself included (0: none)
  std::vector<bool> sliding_layers;   ///< per layer, when sliding_window > 0
  double rope_local_theta = 10000.0;  ///< RoPE base of the sliding layers
  /// >= 0: every sequence opens with this token (Gemma 3, whose attention leans on it): a
  /// forward from position 0 reads it in place of the first token. −1: no such need.
  int bos_token = -1;

  /// Whether layer l attends over a sliding window only.
  bool is_sliding(int l) const {
    return sliding_window > 0 && l >= 0 && static_cast<std::size_t>(l) < sliding_layers.size() &&
           sliding_layers[static_cast<std::size_t>(l)];
  }
  /// RoPE base of layer l.
  double rope_theta_of(int l) const { return is_sliding(l) ? rope_local_theta : rope_theta; }

  /// K+V width of one layer for one token, in elements: w = 2·h_kv·d_h.
  constexpr std::int64_t kv_width() const { return 2LL * kv_heads * head_dim; }
  /// KV bytes of one layer for one token.
  constexpr std::int64_t kv_bytes_per_layer_token() const {
    return kv_width() * dtype_bytes(kv_dtype);
  }
  /// Parameter count (embedding, layers, final norm, untied head).
  std::int64_t parameter_count() const;
  /// Parameters touched per token by the decoder layers (excludes embedding and head).
  std::int64_t layer_parameter_count() const;
};

/// Checks the spec is self-consistent; throws InputError naming the field.
void validate(const ModelSpec& spec);

/// The models kvshift knows by name, values from their published configs.
std::span<const ModelSpec> known_models();

/// Looks a model up by name (case-insensitive); the error lists the known names.
const ModelSpec& find_model(std::string_view name);

}  // namespace kvshift::cost_model
