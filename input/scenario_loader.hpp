// Scenario loading: JSON text -> ScenarioSpec in two passes. Pass one
// reads every section with input::Reader (typed values, unit strings,
// unknown keys with a did-you-mean), collecting ALL problems as
// "/json/pointer: message". Pass two cross-checks what was read: link
// endpoints and event targets exist, names are unique, the cluster is
// connected, the model fits in HBM, the RISK-KV topology is valid for the
// model, the trace and profile files are readable, lossy strategies fit the
// quality budget. Loading only reads; it never writes a file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "input/scenario_spec.hpp"

namespace kvshift::input {

/// The outcome of a load that does not throw: the spec, or every problem found.
struct ScenarioLoad {
  std::optional<ScenarioSpec> spec;   ///< set iff problems is empty
  std::vector<std::string> problems;  ///< "/json/pointer: message", in document order
};

/// Loads JSON text; relative paths in it resolve against `base_dir`. Never throws InputError.
ScenarioLoad try_load_scenario_text(std::string_view text, std::string_view source,
                                    const std::string& base_dir = ".");
/// Loads a scenario file (paths relative to its folder). Never throws InputError.
ScenarioLoad try_load_scenario_file(const std::string& path);

/// As try_load_scenario_text, but throws InputError listing every problem ("source: /ptr: msg").
ScenarioSpec load_scenario_text(std::string_view text, std::string_view source,
                                const std::string& base_dir = ".");
/// As try_load_scenario_file, but throws InputError listing every problem.
ScenarioSpec load_scenario_file(const std::string& path);

/// The text of scenarios/quickstart.json, compiled into the library.
std::string_view embedded_quickstart_text();
/// The embedded quickstart scenario, loaded (what `kvshift run` uses without a file).
ScenarioSpec load_embedded_quickstart();

/// One line describing a loaded scenario: model, GPU, nodes, links, workload, strategies.
std::string summarize(const ScenarioSpec& spec);

}  // namespace kvshift::input
