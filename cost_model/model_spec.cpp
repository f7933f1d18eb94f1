// Registry values are copied from each model's published config.json
// (Hugging Face hub, December 2024 revisions).
#include "cost_model/model_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

ModelSpec make(std::string name, int layers, int hidden, int q_heads, int kv_heads, int head_dim,
               int intermediate, int vocab, double rope_theta, double rms_eps, bool bias,
               bool tied) {
  ModelSpec s;
  s.name = std::move(name);
  s.layers = layers;
  s.hidden = hidden;
  s.q_heads = q_heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.intermediate = intermediate;
  s.vocab = vocab;
  s.rope_theta = rope_theta;
  s.rms_eps = rms_eps;
  s.attention_bias = bias;
  s.tied_embeddings = tied;
  return s;
}

const std::array<ModelSpec, 8>& registry() {
  //                              L   d     hq  hkv dh   inter  vocab   theta   eps   bias  tied
  static const std::array<ModelSpec, 8> models{
      make("qwen2.5-0.5b", 24, 896, 14, 2, 64, 4864, 151936, 1e6, 1e-6, true, true),
      make("qwen2.5-1.5b", 28, 1536, 12, 2, 128, 8960, 151936, 1e6, 1e-6, true, true),
      make("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, 1e6, 1e-6, true, false),
      make("tinyllama-1.1b", 22, 2048, 32, 4, 64, 5632, 32000, 1e4, 1e-5, false, false),
      make("smollm2-135m", 30, 576, 9, 3, 64, 1536, 49152, 1e5, 1e-5, false, true),
      make("smollm2-360m", 32, 960, 15, 5, 64, 2560, 49152, 1e5, 1e-5, false, true),
      make("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 5e5, 1e-5, false, false),
      make("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, 5e5, 1e-5, false, true),
  };
  return models;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view text, std::string_view field) {
  const std::string t = lower(text);
  if (t == "fp32" || t == "float32" || t == "f32") return DType::kF32;
  if (t == "fp16" || t == "float16" || t == "f16" || t == "half") return DType::kF16;
  if (t == "bf16" || t == "bfloat16") return DType::kBF16;
  throw InputError(std::string(field) + ": expected one of fp32, fp16, bf16 (got \"" +
                   std::string(text) + "\")");
}

std::int64_t ModelSpec::layer_parameter_count() const {
  const std::int64_t d = hidden, q = std::int64_t{q_heads} * head_dim,
                     kv = std::int64_t{kv_heads} * head_dim;
  const std::int64_t attn = d * q + 2 * d * kv + q * d + (attention_bias ? q + 2 * kv : 0);
  const std::int64_t mlp = 3 * d * intermediate;
  const std::int64_t norms = gemma ? 4 * d + 2 * std::int64_t{head_dim} : 2 * d;
  return layers * (attn + mlp + norms);
}

std::int64_t ModelSpec::parameter_count() const {
  const std::int64_t embed = std::int64_t{vocab} * hidden;
  return embed + layer_parameter_count() + hidden + (tied_embeddings ? 0 : embed);
}

void validate(const ModelSpec& s) {
  auto positive = [&](int v, const char* field) {
    if (v <= 0) {
      throw InputError("model " + s.name + ": " + field + " must be > 0 (got " + std::to_string(v) +
                       ")");
    }
  };
  positive(s.layers, "layers");
  positive(s.hidden, "hidden_size");
  positive(s.q_heads, "num_attention_heads");
  positive(s.kv_heads, "num_key_value_heads");
  positive(s.head_dim, "head_dim");
  positive(s.intermediate, "intermediate_size");
  positive(s.vocab, "vocab_size");
  if (s.q_heads % s.kv_heads != 0) {
    throw InputError("model " + s.name + ": num_attention_heads (" + std::to_string(s.q_heads) +
                     ") must be a multiple of num_key_value_heads (" + std::to_string(s.kv_heads) +
                     ")");
  }
  if (s.head_dim % 2 != 0) {
    throw InputError("model " + s.name + ": head_dim must be even for RoPE (got " +
                     std::to_string(s.head_dim) + ")");
  }
  if (!(s.rope_theta > 0)) throw InputError("model " + s.name + ": rope_theta must be > 0");
  if (!(s.rms_eps > 0)) throw InputError("model " + s.name + ": rms_norm_eps must be > 0");
  if (s.sliding_window < 0) throw InputError("model " + s.name + ": sliding_window must be >= 0");
  if (s.sliding_window > 0 && s.sliding_layers.size() != static_cast<std::size_t>(s.layers)) {
    throw InputError("model " + s.name + ": layer_types must name each of the " +
                     std::to_string(s.layers) + " layers (got " +
                     std::to_string(s.sliding_layers.size()) + ")");
  }
  if (!(s.rope_local_theta > 0)) {
    throw InputError("model " + s.name + ": rope_local_base_freq must be > 0");
  }
  if (s.query_scale < 0)
    throw InputError("model " + s.name + ": query_pre_attn_scalar must be > 0");
}

std::span<const ModelSpec> known_models() { return registry(); }

const ModelSpec& find_model(std::string_view name) {
  const std::string key = lower(name);
  for (const ModelSpec& m : registry()) {
    if (m.name == key) return m;
  }
  std::string known;
  for (const ModelSpec& m : registry()) known += (known.empty() ? "" : ", ") + m.name;
  throw InputError("--model: unknown model \"" + std::string(name) + "\" (known: " + known +
                   "; or pass a Hugging Face config.json)");
}

}  // namespace kvshift::cost_model
