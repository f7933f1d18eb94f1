// ModelSpec: the shape of a Llama-family decoder (Llama, Qwen2, TinyLlama,
// SmolLM2) as far as KV accounting, predictors and roofline costs need it, and
// the registry of the models kvshift knows by name. Loading a Hugging Face
// config.json lives in scenarios/ (it needs a JSON parser; this folder is pure).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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
