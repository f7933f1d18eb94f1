// Cost table files written by `kvshift profile` and read by the simulator's
// profiled cost provider:
//   {"backend": "cpu"|"cuda", "model": "...", "topology": "G2,G3" (optional),
//    "proxy": "..." (optional), "retention": 0.3 (optional),
//    "machine": {"cpu": "...", "gpu": "...", "versions": {"name": "x.y"}, "date": "..."},
//    "entries": [{"op", "tokens", "sharing", "median_s", "p10_s", "p90_s", "repeats"}]}
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
#include "scenarios/json_reader.hpp"

namespace kvshift::scenarios {

struct MachineInfo {
  std::string cpu;
  std::string gpu;                              ///< "none" for CPU tables
  std::map<std::string, std::string> versions;  ///< compiler, Eigen, CUDA, driver, ...
  std::string date;                             ///< ISO 8601, UTC
};

struct CostTable {
  std::string backend;
  std::string model;
  std::string topology;  ///< groups reconstructed when measured ("G2,G3"), or empty
  std::optional<std::string> proxy;
  std::optional<double> retention;
  MachineInfo machine;
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
/// A ComputeCosts answering from `table`; `fallback` (not owned, may be null) for decode steps.
cost_model::TableCosts make_table_costs(const CostTable& table,
                                        const cost_model::ComputeCosts* fallback = nullptr);

}  // namespace kvshift::scenarios
