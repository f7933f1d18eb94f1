#include "input/spec_files.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cost_model/input_error.hpp"

namespace kvshift::input {
namespace fs = std::filesystem;
using cost_model::GpuSpec;
using cost_model::ModelSpec;
using cost_model::OmissionPlan;

namespace {

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(".json") ||
         fs::exists(fs::path(std::string(s)));
}

int positive_int(const Reader& r, std::string_view key, std::optional<std::int64_t> v) {
  if (!v) return 0;
  if (*v <= 0 || *v > 1'000'000'000) {
    r.problem(key, "must be a positive integer (got " + std::to_string(*v) + ")");
    return 0;
  }
  return static_cast<int>(*v);
}

/// Gemma 3's fields beyond a Llama config (Gemma3TextConfig): each is required, because a
/// default guessed here would silently change the model.
void read_gemma3(const Reader& r, ModelSpec& m) {
  if (auto act = r.string("hidden_activation"); act && *act != "gelu_pytorch_tanh") {
    r.problem("hidden_activation", "Gemma 3 uses \"gelu_pytorch_tanh\" (got \"" + *act + "\")");
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "rope_scaling"}) {
    if (r.has(key) && !r.node()[key].is_null()) r.problem(key, "must be null (not modelled)");
  }
  if (auto scalar = r.number("query_pre_attn_scalar")) {
    if (*scalar > 0) {
      m.query_scale = 1.0 / std::sqrt(*scalar);
    } else {
      r.problem("query_pre_attn_scalar", "must be > 0");
    }
  }
  if (auto theta = r.number("rope_local_base_freq")) m.rope_local_theta = *theta;
  m.sliding_window = positive_int(r, "sliding_window", r.integer("sliding_window"));
  if (auto bos = r.integer("bos_token_id")) {
    if (*bos >= 0 && *bos < m.vocab) {
      m.bos_token = static_cast<int>(*bos);
    } else {
      r.problem("bos_token_id", "must be a token id in [0, vocab_size)");
    }
  }
  if (!r.has("layer_types") || !r.node()["layer_types"].is_array()) {
    r.problem("layer_types", "must list \"sliding_attention\" or \"full_attention\" per layer");
    return;
  }
  for (const Json& t : r.node()["layer_types"]) {
    if (t == "sliding_attention" || t == "full_attention") {
      m.sliding_layers.push_back(t == "sliding_attention");
    } else {
      r.problem("layer_types", "entries must be \"sliding_attention\" or \"full_attention\" (got " +
                                   t.dump() + ")");
      return;
    }
  }
}

}  // namespace

ModelSpec parse_hf_config(const Json& config, const std::string& name, std::string_view source) {
  Diagnostics diag;
  Reader r(config, "", diag);
  ModelSpec m;
  m.name = name;
  if (auto arch = r.string("model_type", false)) {
    static constexpr std::string_view kSupported[] = {"llama", "qwen2", "mistral", "gemma3_text"};
    if (std::find(std::begin(kSupported), std::end(kSupported), *arch) == std::end(kSupported)) {
      r.problem("model_type", "unsupported architecture \"" + *arch +
                                  "\" (supported: llama, qwen2, mistral, gemma3_text)");
    }
    m.attention_bias = *arch == "qwen2";
    m.gemma = *arch == "gemma3_text";
  }
  m.layers = positive_int(r, "num_hidden_layers", r.integer("num_hidden_layers"));
  m.hidden = positive_int(r, "hidden_size", r.integer("hidden_size"));
  m.q_heads = positive_int(r, "num_attention_heads", r.integer("num_attention_heads"));
  m.kv_heads = m.q_heads;
  if (r.has("num_key_value_heads")) {
    m.kv_heads = positive_int(r, "num_key_value_heads", r.integer("num_key_value_heads"));
  }
  m.intermediate = positive_int(r, "intermediate_size", r.integer("intermediate_size"));
  m.vocab = positive_int(r, "vocab_size", r.integer("vocab_size"));
  if (r.has("head_dim") && !r.node()["head_dim"].is_null()) {
    m.head_dim = positive_int(r, "head_dim", r.integer("head_dim"));
  } else if (m.q_heads > 0) {
    m.head_dim = m.hidden / m.q_heads;
  }
  m.rope_theta = r.number("rope_theta", false).value_or(10000.0);
  m.rms_eps = r.number("rms_norm_eps", false).value_or(1e-6);
  m.tied_embeddings = r.boolean("tie_word_embeddings", false).value_or(m.gemma);
  if (auto bias = r.boolean("attention_bias", false)) m.attention_bias = *bias;
  if (m.gemma) read_gemma3(r, m);
  if (auto dtype = r.string("torch_dtype", false)) {
    try {
      m.weight_dtype = cost_model::parse_dtype(*dtype, "torch_dtype");
    } catch (const InputError& e) {
      r.problem("torch_dtype", e.what());
    }
  }
  diag.throw_if_any(source);
  try {
    cost_model::validate(m);
  } catch (const InputError& e) {
    throw InputError(std::string(source) + ": " + e.what());
  }
  return m;
}

ModelSpec resolve_model(std::string_view name_or_path) {
  if (!looks_like_path(name_or_path)) return cost_model::find_model(name_or_path);
  fs::path p{std::string(name_or_path)};
  if (fs::is_directory(p)) p /= "config.json";
  const Json config = read_json_file(p.string());
  std::string name = p.parent_path().filename().string();
  if (name.empty()) name = p.stem().string();
  return parse_hf_config(config, name, p.string());
}

ModelSpec resolve_costed_model(std::string_view name_or_path) {
  ModelSpec m = resolve_model(name_or_path);
  if (m.sliding_window > 0) {
    throw InputError(
        std::string(name_or_path) + ": " + m.name +
        " has sliding-window layers, whose KV the cost model would count over the whole "
        "context (every move's bytes too large); scenarios, cost, sweep and profile take models "
        "without them. kvshift calibrate and quality run it.");
  }
  return m;
}

std::optional<std::int64_t> model_context_tokens(std::string_view name_or_path) {
  if (!looks_like_path(name_or_path)) {
    // max_position_embeddings of the published config.json of each built-in model.
    static constexpr std::pair<std::string_view, std::int64_t> kContext[] = {
        {"qwen2.5-0.5b", 32768},  {"qwen2.5-1.5b", 32768}, {"qwen2.5-7b", 131072},
        {"tinyllama-1.1b", 2048}, {"smollm2-135m", 8192},  {"smollm2-360m", 8192},
        {"llama-3.1-8b", 131072}, {"llama-3.2-1b", 131072}};
    std::string name(name_or_path);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& [known, tokens] : kContext) {
      if (known == name) return tokens;
    }
    return std::nullopt;
  }
  fs::path p{std::string(name_or_path)};
  std::error_code ec;
  if (fs::is_directory(p, ec)) p /= "config.json";
  try {
    const Json config = read_json_file(p.string());
    const auto it = config.find("max_position_embeddings");
    if (it != config.end() && it->is_number_integer() && it->get<std::int64_t>() > 0) {
      return it->get<std::int64_t>();
    }
  } catch (const std::exception&) {  // an unreadable config is reported where it is parsed
  }
  return std::nullopt;
}

GpuSpec parse_gpu_spec(const Reader& r) {
  r.allow_only({"name", "base", "peak_dense_fp16_tflops", "hbm_bandwidth", "hbm_capacity",
                "host_link", "launch_overhead", "gemm_efficiency", "attention_efficiency",
                "memory_efficiency"});
  GpuSpec g;
  if (auto base = r.string("base", false)) {
    try {
      g = cost_model::find_gpu(*base);
    } catch (const InputError& e) {
      r.problem("base", e.what());
    }
  }
  const bool full = !r.has("base");
  if (auto name = r.string("name", full)) g.name = *name;
  if (auto v = r.number("peak_dense_fp16_tflops", full)) g.peak_dense_fp16 = {*v * 1e12};
  if (auto v = r.bandwidth("hbm_bandwidth", full)) g.hbm_bandwidth = *v;
  if (auto v = r.bytes("hbm_capacity", full)) g.hbm_capacity = *v;
  if (auto v = r.bandwidth("host_link", full)) g.host_link = *v;
  if (auto v = r.duration("launch_overhead", false)) g.launch_overhead = *v;
  if (auto v = r.number("gemm_efficiency", false)) g.gemm_efficiency = *v;
  if (auto v = r.number("attention_efficiency", false)) g.attention_efficiency = *v;
  if (auto v = r.number("memory_efficiency", false)) g.memory_efficiency = *v;
  return g;
}

GpuSpec resolve_gpu(std::string_view name_or_path) {
  if (!looks_like_path(name_or_path)) return cost_model::find_gpu(name_or_path);
  const std::string path(name_or_path);
  const Json doc = read_json_file(path);
  Diagnostics diag;
  GpuSpec g = parse_gpu_spec(Reader(doc, "", diag));
  diag.throw_if_any(path);
  try {
    cost_model::validate(g);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  return g;
}

namespace {

/// A topology's "model": what it was measured on must be the scenario's model (its groups and
/// measured ΔNLL belong to that model only).
void check_made_for(const Reader& r, const Reader& made_for, const ModelSpec& model) {
  // Cross-check of what the topology was measured on: {"name": ..., "layers": N, and
  // optionally "hidden", "kv_heads", "head_dim"}. Its ΔNLL belongs to that model only.
  if (auto n = made_for.integer("layers", false); n && *n != model.layers) {
    r.problem("model", "topology was made for a " + std::to_string(*n) + "-layer model, not " +
                           model.name + " (" + std::to_string(model.layers) + " layers)");
  }
  auto lower = [](std::string v) {
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return v;
  };
  if (auto name = made_for.string("name", false);
      name && !model.name.empty() && lower(*name) != lower(model.name)) {
    made_for.problem("name", "topology was made for " + *name + ", not " + model.name +
                                 " (its groups and measured ΔNLL belong to that model)");
  }
  for (const auto& [key, value] : {std::pair<std::string_view, int>{"hidden", model.hidden},
                                   {"kv_heads", model.kv_heads},
                                   {"head_dim", model.head_dim}}) {
    if (auto n = made_for.integer(key, false); n && *n != value) {
      made_for.problem(key, "topology was made for a model with " + std::string(key) + " " +
                                std::to_string(*n) + ", not " + model.name + "'s " +
                                std::to_string(value));
    }
  }
}

/// A topology's explicit "groups": each group's target and anchor layers.
std::vector<cost_model::GroupPlan> group_plans(const Reader& r) {
  std::vector<cost_model::GroupPlan> plans;
  r.each("groups", [&](const Reader& g) {
    g.allow_only({"group", "target_layers", "anchor_layers"});
    cost_model::GroupPlan plan;
    plan.group = static_cast<int>(g.integer("group").value_or(0));
    auto ints = [&](std::string_view key, std::vector<int>& out) {
      g.each(key, [&](const Reader& e) {
        if (!e.node().is_number_integer())
          e.problem("expected a layer index");
        else
          out.push_back(e.node().get<int>());
      });
    };
    ints("target_layers", plan.target_layers);
    ints("anchor_layers", plan.anchor_layers);
    plans.push_back(std::move(plan));
  });
  return plans;
}

}  // namespace

OmissionPlan parse_topology(const Reader& r, const ModelSpec& model) {
  r.allow_only({"model", "group_width", "anchor_width", "omitted_groups", "groups", "quality",
                "predictor_dtype", "gate", "eps", "sink_rows"});
  int sink_rows = 0;
  if (auto v = r.integer("sink_rows", false)) {
    if (*v < 0 || *v > 1'000'000'000) {
      r.problem("sink_rows",
                "must be a whole number of rows >= 0 (got " + std::to_string(*v) + ")");
    } else {
      sink_rows = static_cast<int>(*v);
    }
  }
  cost_model::OmissionOptions opt;
  if (auto w = r.integer("group_width", false)) opt.group_width = positive_int(r, "group_width", w);
  if (auto w = r.integer("anchor_width", false))
    opt.anchor_width = positive_int(r, "anchor_width", w);
  if (auto made_for = r.object("model", false)) check_made_for(r, *made_for, model);
  std::vector<int> groups;  // omitted_groups, each once (required without "groups")
  if (r.has("omitted_groups") || !r.has("groups"))
    r.each("omitted_groups", [&](const Reader& e) {
      if (!e.node().is_number_integer()) {
        e.problem("expected a group number (1-based)");
      } else if (std::find(groups.begin(), groups.end(), e.node().get<int>()) != groups.end()) {
        e.problem("group " + std::to_string(e.node().get<int>()) + " is listed twice");
      } else {
        groups.push_back(e.node().get<int>());
      }
    });
  if (r.has("groups")) {
    std::vector<cost_model::GroupPlan> plans = group_plans(r);
    if (r.has("omitted_groups")) {  // both given: they must name the same groups
      std::vector<int> described;
      for (const auto& p : plans) described.push_back(p.group);
      std::vector<int> listed = groups;
      std::sort(described.begin(), described.end());
      std::sort(listed.begin(), listed.end());
      if (described != listed) {
        auto text = [](const std::vector<int>& v) {
          std::string t;
          for (int g : v) t += (t.empty() ? "G" : ", G") + std::to_string(g);
          return t.empty() ? std::string("none") : t;
        };
        r.problem("omitted_groups", "lists " + text(listed) + " but \"groups\" describes " +
                                        text(described) + "; they must name the same groups");
      }
    }
    if (!r.diagnostics().empty()) return {};
    return OmissionPlan::from_plans(model.layers, std::move(plans), opt.group_width)
        .with_sink_rows(sink_rows);
  }
  if (!r.diagnostics().empty()) return {};
  return OmissionPlan::from_groups(model.layers, std::move(groups), opt).with_sink_rows(sink_rows);
}

OmissionPlan resolve_topology(std::string_view text, const ModelSpec& model) {
  if (!text.ends_with(".json")) return OmissionPlan::parse(text, model);
  const std::string path(text);
  const Json doc = read_json_file(path);
  Diagnostics diag;
  OmissionPlan t;
  try {
    t = parse_topology(Reader(doc, "", diag), model);
  } catch (const InputError& e) {
    diag.add("", e.what());
  }
  diag.throw_if_any(path);
  return t;
}

std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 0xCBF29CE484222325ULL;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001B3ULL;
    }
  }
  char text[32];
  std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace kvshift::input
