// Readers for the small spec files the cost model accepts in place of a
// built-in name: a Hugging Face config.json (Llama/Qwen2 family), a GPU spec
// JSON (a preset with overrides, or a full spec) and a topology.json (written
// by `kvshift calibrate`, or by hand).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "input/json_reader.hpp"

namespace kvshift::input {

/// ModelSpec from the text of a config.json; `name` labels it in messages.
cost_model::ModelSpec parse_hf_config(const Json& config, const std::string& name,
                                      std::string_view source);
/// A built-in model name, a config.json path, or a folder holding config.json.
cost_model::ModelSpec resolve_model(std::string_view name_or_path);
/// resolve_model for what the cost model prices (scenarios, `cost`, `sweep`, `profile`): also
/// refuses (InputError) a model with sliding-window layers (Gemma 3), whose KV the cost model
/// would count over the whole context in every layer.
cost_model::ModelSpec resolve_costed_model(std::string_view name_or_path);

/// The longest context (prompt + generated tokens) the model was trained for: config.json's
/// max_position_embeddings, or the published value of a built-in model; nullopt when unknown.
std::optional<std::int64_t> model_context_tokens(std::string_view name_or_path);

/// GpuSpec from JSON: {"base": "h200", "hbm_bandwidth": "4TB/s", ...} or a full spec.
cost_model::GpuSpec parse_gpu_spec(const Reader& r);
/// A preset name or a GPU spec JSON path.
cost_model::GpuSpec resolve_gpu(std::string_view name_or_path);

/// OmissionPlan from a topology.json object: {"group_width": 2, "omitted_groups": [2, 5]}
/// and optionally explicit "groups": [{"group", "target_layers", "anchor_layers"}].
cost_model::OmissionPlan parse_topology(const Reader& r, const cost_model::ModelSpec& model);
/// "none", "paper", "G2,G5", or a topology.json path.
cost_model::OmissionPlan resolve_topology(std::string_view text,
                                          const cost_model::ModelSpec& model);

/// "fnv1a64:<16 hex>" of a file's bytes (FNV-1a, byte by byte): how a scenario names the
/// topology.json and quality.json files its ΔNLLs come from, and how `kvshift quality` names
/// the topology a risk-kv row measured. A file it cannot read digests as empty.
std::string file_digest(const std::string& path);

}  // namespace kvshift::input
