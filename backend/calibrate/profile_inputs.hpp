// The real weights a profile or a live cost source runs: the target model's
// checkpoint, the ProxyKV proxy (its own checkpoint, or the target's first k
// layers as the mapper was trained with), the calibrated RISK-KV predictors
// (`kvshift calibrate`'s predictors.safetensors) and the trained mapper
// (tools/train_mapper.py). Loaded once, checked against each other (the
// predictors hold every group of the topology, the mapper fits the pair and
// was trained for this target), and digested so a cost table names exactly
// what it measured. In kvshift_calibrate because it reads the predictor files
// calibration writes.
#pragma once

#include <string>

#include "backend/profiler.hpp"
#include "cost_model/omission_plan.hpp"

namespace kvshift::backend::calibrate {

/// Where the inputs are. Every path is optional; `what` names the option or JSON field in
/// every message ("--model", "/live/model").
struct ProfilePaths {
  std::string model;       ///< Hugging Face folder with weights
  std::string proxy;       ///< the proxy's own folder; empty: the mapper's (or none)
  int proxy_layers = 0;    ///< the target's first k layers as the proxy; 0: the mapper's
  std::string predictors;  ///< predictors.safetensors
  std::string mapper;      ///< mapper.safetensors (its mapper.json beside it)
  struct Names {
    std::string model = "--model", proxy = "--proxy", proxy_layers = "--proxy-layers",
                predictors = "--predictors", mapper = "--mapper";
  } names;
};

/// Loads what `paths` names. `topology` (of the target) must be covered by the predictors when
/// they are given. InputError names the option and the file.
ProfileInputs load_profile_inputs(const ProfilePaths& paths,
                                  const cost_model::OmissionPlan& topology);

/// "fnv1a64:<16 hex digits>" of a file's bytes, or of a model folder's config.json and weights.
std::string digest_path(const std::string& path);

}  // namespace kvshift::backend::calibrate
