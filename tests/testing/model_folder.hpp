// Small Llama-style Hugging Face folders and token files for tests that drive
// the model commands as a user would: config.json + model.safetensors with
// seeded N(0, 1/in) weights (norms 1), and little-endian int32 corpora.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kvshift::testing {

struct LlamaShape {
  int hidden = 16;
  int layers = 8;
  int heads = 2;
  int kv_heads = 1;
  int head_dim = 8;
  int intermediate = 32;
  int vocab = 40;
  bool tied = false;  ///< tie_word_embeddings: no lm_head.weight
};

/// Writes `dir`/config.json and `dir`/model.safetensors for `s`, weights drawn from `seed`.
inline void write_llama_folder(const std::filesystem::path& dir, const LlamaShape& s,
                               std::uint64_t seed = 17) {
  using nlohmann::json;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << json{
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.intermediate},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"vocab_size", s.vocab},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"tie_word_embeddings", s.tied}}.dump();
  const std::int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> ts{
      {"model.embed_tokens.weight", {s.vocab, h}}, {"model.norm.weight", {h}}};
  if (!s.tied) ts.push_back({"lm_head.weight", {s.vocab, h}});
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts.push_back({p + "input_layernorm.weight", {h}});
    ts.push_back({p + "post_attention_layernorm.weight", {h}});
    ts.push_back({p + "self_attn.q_proj.weight", {q, h}});
    ts.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    ts.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    ts.push_back({p + "self_attn.o_proj.weight", {h, q}});
    ts.push_back({p + "mlp.gate_proj.weight", {s.intermediate, h}});
    ts.push_back({p + "mlp.up_proj.weight", {s.intermediate, h}});
    ts.push_back({p + "mlp.down_proj.weight", {h, s.intermediate}});
  }
  std::mt19937_64 rng(seed);
  json header;
  std::string data;
  for (const auto& [name, shape] : ts) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    const bool norm = shape.size() == 1;
    std::normal_distribution<float> dist(0.0f, norm ? 0.0f : 1.0f / std::sqrt(float(shape.back())));
    const std::size_t begin = data.size();
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = norm ? 1.0f : dist(rng);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  while (text.size() % 8) text.push_back(' ');
  std::ofstream f(dir / "model.safetensors", std::ios::binary);
  const std::uint64_t len = text.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f << text << data;
}

/// A token file of `n` ids in [0, vocab): a slow ramp with seeded jitter (text-like repeats).
inline void write_token_file(const std::filesystem::path& path, std::size_t n, int vocab) {
  std::ofstream f(path, std::ios::binary);
  std::mt19937_64 rng(3);
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = static_cast<std::int32_t>((i * 5 + rng() % 4) % static_cast<std::size_t>(vocab));
    f.write(reinterpret_cast<const char*>(&t), 4);
  }
}

}  // namespace kvshift::testing
