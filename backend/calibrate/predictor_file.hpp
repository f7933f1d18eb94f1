// predictors.safetensors: the folded RISK-KV predictors of a topology, one
// weight B [|A|·w, |T|·w] and bias d [|T|·w] per omitted group ("G<g>.weight",
// "G<g>.bias"), in F32 or F16 (round to nearest even), plus for a model that norms its
// keys (Gemma) each target layer's key norm ("G<g>.key_norm" [|T|, head_dim], F32). The header's
// __metadata__ names the model, the dtype and each group's anchor and target
// layers ("G<g>.anchor_layers": "0,1,6,7"), and "sink_rows" when the first rows are sent exact
// (GroupPredictor::sink_rows; absent: 0); read_predictors reads it back. Leaves out: sharding.
#pragma once

#include <string>
#include <vector>

#include "backend/calibrate/fit_data.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend::calibrate {

/// The bytes of a safetensors file holding `groups` (F32 or F16; other dtypes: InputError).
std::string predictors_safetensors(const std::vector<FittedGroup>& groups, cost_model::DType dtype,
                                   const std::string& model_name);

/// One group's predictor as a predictors.safetensors file holds it.
struct StoredPredictor {
  int group = 0;
  GroupPredictor predictor;
};

/// Reads a predictors.safetensors written by predictors_safetensors, checking each group's layers
/// against `spec` and its shapes ([|A|·w, |T|·w], w = spec.kv_width()); InputError names the file,
/// the group and what is wrong.
std::vector<StoredPredictor> read_predictors(const std::string& path,
                                             const cost_model::ModelSpec& spec);

/// Bytes of one group's predictor in `dtype`: (A·D + D) elements.
double predictor_bytes(const GroupPredictor& p, cost_model::DType dtype);

}  // namespace kvshift::backend::calibrate
