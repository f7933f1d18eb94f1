// ScenarioSpec: everything a scenario file says, as plain typed structs. The
// simulator takes the part it simulates (sim::SimulationSpec, the base); the
// rest is for the tool around it: the scenario's name, where its costs come
// from, its SLOs and which files a run writes. Paths are already resolved
// against the scenario file's folder.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost_model/units.hpp"
#include "sim/spec.hpp"

namespace kvshift::input {

enum class CostSourceKind { kAnalytic, kProfile, kLive };

/// kLive: the backend and the real weights the live measurements run (paths resolved).
struct LiveSpec {
  std::string backend = "cpu";  ///< "cpu" | "cuda"
  std::string model;            ///< the target's Hugging Face folder (with weights)
  std::string proxy;            ///< the proxy's folder; empty: the mapper's proxy
  int proxy_layers = 0;         ///< the target's first k layers as the proxy; 0: the mapper's
  std::string predictors;       ///< predictors.safetensors (RISK-KV)
  std::string mapper;           ///< mapper.safetensors (ProxyKV)
  int warmup = 1;               ///< untimed runs per shape
  int repeats = 3;              ///< timed runs per shape (the median is used)
};

struct CostSourceSpec {
  CostSourceKind kind = CostSourceKind::kAnalytic;
  std::string profile_path;  ///< kProfile: resolved path of the cost table
  LiveSpec live;             ///< kLive
};

struct SloSpec {
  std::optional<Seconds> ttft;  ///< time to first token
  std::optional<Seconds> tpot;  ///< time per output token
  std::optional<Seconds> e2e;   ///< end-to-end latency
};

/// The files a run writes (outputs.link_sample_interval is simulated: SimulationSpec).
struct OutputSpec {
  std::string dir;  ///< empty: kvshift-out/<scenario>-<timestamp>/
  std::vector<std::string> files{"summary", "requests", "recoveries", "links", "trace"};
};

struct ScenarioSpec : sim::SimulationSpec {
  std::string name;
  std::string description;
  std::string source;  ///< file path, or "<embedded quickstart>" / "<text>"
  CostSourceSpec cost_source;
  SloSpec slo;
  OutputSpec outputs;
  /// What the loader accepted but a reader must know (e.g. requests longer than the model's
  /// context); validate and run print them.
  std::vector<std::string> notes;
};

}  // namespace kvshift::input
