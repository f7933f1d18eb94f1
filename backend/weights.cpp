// Weight loading (Hugging Face safetensors) and seeded random weights; see weights.hpp.
#include "backend/weights.hpp"

#include <filesystem>
#include <map>
#include <random>

#include "backend/safetensors.hpp"
#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/spec_files.hpp"

namespace kvshift::backend {
namespace fs = std::filesystem;
using cost_model::ModelSpec;

namespace {

/// Finds each tensor in whichever file of the checkpoint holds it.
class TensorSource {
 public:
  explicit TensorSource(const fs::path& folder) {
    const fs::path single = folder / "model.safetensors";
    const fs::path index = folder / "model.safetensors.index.json";
    if (fs::exists(index)) {
      load_index(folder, index);
    } else if (fs::exists(single)) {
      files_.emplace(single.filename().string(), SafetensorsFile::open(single.string()));
      default_ = &files_.begin()->second;
    } else {
      throw InputError(folder.string() + ": no model.safetensors or model.safetensors.index.json");
    }
  }

  const SafetensorsFile& file_for(const std::string& tensor) const {
    if (default_) return *default_;
    const auto it = weight_map_.find(tensor);
    if (it == weight_map_.end()) {
      throw InputError(index_path_ + ": weight_map has no entry for tensor \"" + tensor + "\"");
    }
    return files_.at(it->second);
  }
  bool has(const std::string& tensor) const {
    return default_ ? default_->find(tensor) != nullptr : weight_map_.count(tensor) > 0;
  }
  Matrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols) const {
    return file_for(name).read(name, {rows, cols});
  }
  Vector vector(const std::string& name, std::int64_t n) const {
    return file_for(name).read_vector(name, n);
  }

 private:
  void load_index(const fs::path& folder, const fs::path& index) {
    index_path_ = index.string();
    const input::Json doc = input::read_json_file(index_path_);
    input::Diagnostics diag;
    input::Reader r(doc, "", diag);
    r.allow_only({"metadata", "weight_map"});
    if (auto map = r.object("weight_map")) {
      for (const auto& [tensor, file] : map->node().items()) {
        if (!file.is_string()) {
          map->problem(tensor, "must be a file name");
          continue;
        }
        const std::string name = file.get<std::string>();
        if (name.find('/') != std::string::npos || name == "..") {
          map->problem(tensor, "must be a file name in the same folder (got \"" + name + "\")");
          continue;
        }
        weight_map_[tensor] = name;
      }
    }
    diag.throw_if_any(index_path_);
    for (const auto& [tensor, file] : weight_map_) {
      if (!files_.count(file)) {
        files_.emplace(file, SafetensorsFile::open((folder / file).string()));
      }
    }
  }

  std::map<std::string, SafetensorsFile> files_;
  std::map<std::string, std::string> weight_map_;
  const SafetensorsFile* default_ = nullptr;
  std::string index_path_;
};

LayerWeights load_layer(const TensorSource& src, const ModelSpec& m, int l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const std::int64_t h = m.hidden, q = std::int64_t{m.q_heads} * m.head_dim,
                     kv = std::int64_t{m.kv_heads} * m.head_dim, f = m.intermediate;
  LayerWeights w;
  w.attn_norm = src.vector(p + "input_layernorm.weight", h);
  w.wq = src.matrix(p + "self_attn.q_proj.weight", q, h);
  w.wk = src.matrix(p + "self_attn.k_proj.weight", kv, h);
  w.wv = src.matrix(p + "self_attn.v_proj.weight", kv, h);
  w.wo = src.matrix(p + "self_attn.o_proj.weight", h, q);
  if (m.attention_bias) {
    w.bq = src.vector(p + "self_attn.q_proj.bias", q).transpose();
    w.bk = src.vector(p + "self_attn.k_proj.bias", kv).transpose();
    w.bv = src.vector(p + "self_attn.v_proj.bias", kv).transpose();
  }
  if (m.gemma) {
    // Gemma's norms are x·(1 + w): stored here as 1 + w, so the forward multiplies as for Llama.
    const auto norm = [&](const std::string& name, std::int64_t n) {
      Vector v = src.vector(p + name, n);
      v.array() += 1.0f;
      return v;
    };
    w.attn_norm.array() += 1.0f;
    w.q_norm = norm("self_attn.q_norm.weight", m.head_dim);
    w.k_norm = norm("self_attn.k_norm.weight", m.head_dim);
    w.post_attn_norm = norm("post_attention_layernorm.weight", h);
    w.mlp_norm = norm("pre_feedforward_layernorm.weight", h);
    w.post_mlp_norm = norm("post_feedforward_layernorm.weight", h);
  } else {
    w.mlp_norm = src.vector(p + "post_attention_layernorm.weight", h);
  }
  w.w_gate = src.matrix(p + "mlp.gate_proj.weight", f, h);
  w.w_up = src.matrix(p + "mlp.up_proj.weight", f, h);
  w.w_down = src.matrix(p + "mlp.down_proj.weight", h, f);
  return w;
}

Matrix random_matrix(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols) {
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  Matrix m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

Vector random_norm(std::mt19937_64& rng, std::int64_t n) {
  std::normal_distribution<float> dist(1.0f, 0.1f);
  Vector v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = dist(rng);
  return v;
}

}  // namespace

ModelWeights load_hf_model(const std::string& folder) {
  ModelWeights w;
  if (!fs::is_directory(folder)) {
    throw InputError(folder + ": not a model folder (expected config.json and model.safetensors)");
  }
  w.spec = input::resolve_model(folder);
  const ModelSpec& m = w.spec;
  const TensorSource src{fs::path(folder)};
  w.embed = src.matrix("model.embed_tokens.weight", m.vocab, m.hidden);
  for (int l = 0; l < m.layers; ++l) w.layers.push_back(load_layer(src, m, l));
  w.final_norm = src.vector("model.norm.weight", m.hidden);
  if (m.gemma) w.final_norm.array() += 1.0f;
  if (!m.tied_embeddings) {
    if (!src.has("lm_head.weight")) {
      throw InputError(folder + ": tensor \"lm_head.weight\" is missing (expected shape [" +
                       std::to_string(m.vocab) + ", " + std::to_string(m.hidden) +
                       "]; or set tie_word_embeddings)");
    }
    w.lm_head = src.matrix("lm_head.weight", m.vocab, m.hidden);
  }
  return w;
}

ModelSpec truncated_spec(ModelSpec spec, int k) {
  const int layers = spec.layers;
  if (k < 1 || k >= layers) {
    throw InputError("--proxy-layers: a truncated proxy keeps 1 to " + std::to_string(layers - 1) +
                     " of the target's " + std::to_string(layers) + " layers (got " +
                     std::to_string(k) + ")");
  }
  spec.layers = k;
  spec.name += "[:" + std::to_string(k) + "]";
  return spec;
}

ModelWeights truncate_layers(ModelWeights w, int k) {
  w.spec = truncated_spec(std::move(w.spec), k);
  w.layers.resize(static_cast<std::size_t>(k));
  return w;
}

ModelWeights random_weights(const ModelSpec& spec, std::uint64_t seed) {
  cost_model::validate(spec);
  ModelWeights w;
  w.spec = spec;
  std::mt19937_64 rng(seed);
  const std::int64_t h = spec.hidden, q = std::int64_t{spec.q_heads} * spec.head_dim,
                     kv = std::int64_t{spec.kv_heads} * spec.head_dim, f = spec.intermediate;
  w.embed = random_matrix(rng, spec.vocab, h);
  w.layers.resize(spec.layers);
  for (auto& l : w.layers) {
    l.attn_norm = random_norm(rng, h);
    l.wq = random_matrix(rng, q, h);
    l.wk = random_matrix(rng, kv, h);
    l.wv = random_matrix(rng, kv, h);
    l.wo = random_matrix(rng, h, q);
    if (spec.attention_bias) {
      l.bq = random_matrix(rng, 1, q) * 0.1f;
      l.bk = random_matrix(rng, 1, kv) * 0.1f;
      l.bv = random_matrix(rng, 1, kv) * 0.1f;
    }
    l.mlp_norm = random_norm(rng, h);
    if (spec.gemma) {
      l.q_norm = random_norm(rng, spec.head_dim);
      l.k_norm = random_norm(rng, spec.head_dim);
      l.post_attn_norm = random_norm(rng, h);
      l.post_mlp_norm = random_norm(rng, h);
    }
    l.w_gate = random_matrix(rng, f, h);
    l.w_up = random_matrix(rng, f, h);
    l.w_down = random_matrix(rng, h, f);
  }
  w.final_norm = random_norm(rng, h);
  if (!spec.tied_embeddings) w.lm_head = random_matrix(rng, spec.vocab, h);
  return w;
}

}  // namespace kvshift::backend
