// Cost table files written by `kvshift profile` and read by the simulator's
// profiled cost provider:
//   {"backend": "cpu"|"cuda", "model": "...", "topology": "G2,G3" (optional),
//    "proxy": "..." (optional), "retention": 0.3 (optional),
//    "machine": {"cpu": "...", "gpu": "...", "versions": {"name": "x.y"}, "date": "..."},
//    "inputs": {"weights": "real"|"seeded random",             (optional)
//               "model"|"proxy"|"predictors"|"mapper": {"path": "...", "digest": "fnv1a64:..."}},
//    "notes": {"<op>": "what its timing leaves out on this backend"},  (optional)
//    "entries": [{"op", "tokens", "sharing", "batch" (decode; default 1), "median_s", "p10_s",
//                 "p90_s", "repeats"}]}
// Ops: prefill, decode (tokens = context per request), reconstruct, proxy_score, prune,
// predictor_load.
// Reading is strict (Reader-based): unknown keys, unknown ops, non-positive
// sizes or times, p10 ≤ median ≤ p90 violated, or duplicate (op, tokens,
// sharing) rows are all reported with their JSON pointers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/table_costs.hpp"
#include "input/json_reader.hpp"

namespace kvshift::input {

struct MachineInfo {
  std::string cpu;
  std::string gpu;                              ///< "none" for CPU tables
  std::map<std::string, std::string> versions;  ///< compiler, Eigen, CUDA, driver, ...
  std::string date;                             ///< ISO 8601, UTC
};

/// A file the table was measured with, and its digest (backend/calibrate/profile_inputs.hpp).
struct TableInput {
  std::string path;
  std::string digest;
};

struct CostTable {
  std::string backend;
  std::string model;
  std::string topology;  ///< groups reconstructed when measured ("G2,G3"), or empty
  std::optional<std::string> proxy;
  std::optional<double> retention;
  MachineInfo machine;
  std::string weights;  ///< "real" or "seeded random"; empty in tables written before inputs
  std::map<std::string, TableInput> inputs;  ///< "model", "proxy", "predictors", "mapper"
  std::map<std::string, std::string> notes;  ///< per op: what its timing leaves out
  std::vector<cost_model::CostTableEntry> entries;
  /// Number of groups in `topology` (0 when empty or "none").
  int topology_groups() const;
};

/// Parses a cost table document; throws InputError listing every problem, prefixed by `source`.
CostTable parse_cost_table(const Json& doc, std::string_view source);
/// Parses cost table text; malformed JSON (including out-of-range numbers) is an InputError.
CostTable parse_cost_table_text(std::string_view text, std::string_view source);
/// Reads and parses a cost table file.
CostTable read_cost_table(const std::string& path);
/// The JSON form (the inverse of parse_cost_table).
Json cost_table_json(const CostTable& table);
/// A ComputeCosts answering from `table`, named `path` in its sources; `fallback` (not
/// owned, may be null) answers the ops the table lacks.
cost_model::TableCosts make_table_costs(const CostTable& table, const std::string& path,
                                        const cost_model::ComputeCosts* fallback = nullptr);
/// The ops a table has rows for.
bool table_has(const CostTable& table, std::string_view op);

}  // namespace kvshift::input
