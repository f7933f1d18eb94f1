// What `kvshift calibrate` writes, built from a CalibrationResult: the
// topology.json that `kvshift cost --topology` and scenarios read, report.json
// (model, gate, eps, omitted_groups, omitted_fraction, wall_time_s, test {...},
// the selection trace, the frontier and the fits), report.md with Table
// I/II-style tables and the frontier table, and frontier.svg (omitted KV vs
// test share of requests over ε, a line per gate). topology.json's "quality"
// holds the test set's figures. Pure text builders; the command writes the
// files atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backend/calibrate/calibration.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend::calibrate {

/// Run facts that are not part of the procedure's result.
struct RunInfo {
  std::string model_path;
  std::string corpus_path;
  std::int64_t corpus_tokens = 0;
  cost_model::DType predictor_dtype = cost_model::DType::kF32;
  double wall_time_s = 0.0;
  double cpu_time_s = 0.0;  ///< process CPU time, all threads
};

/// topology.json for the chosen topology.
nlohmann::json topology_json(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                             const RunInfo& info);

/// report.json.
nlohmann::json report_json(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                           const RunInfo& info);

/// report.md.
std::string report_markdown(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                            const RunInfo& info);

/// frontier.svg: omitted KV (x) vs test violation share (y), one line per gate over the ε grid.
std::string frontier_svg(const CalibrationResult& r);

/// "G2,G3" or "none (omit nothing)".
std::string groups_text(const std::vector<int>& groups);

}  // namespace kvshift::backend::calibrate
