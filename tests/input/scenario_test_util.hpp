// Helpers for scenario loader tests: start from the shipped quickstart, change
// one thing, and look at the exact problems the loader reports.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "input/scenario_loader.hpp"

namespace kvshift::input::testing {

using nlohmann::json;

/// The shipped quickstart scenario as JSON.
inline json quickstart_json() { return json::parse(std::string(embedded_quickstart_text())); }

/// Problems found loading `doc` (paths resolve against scenarios/).
inline std::vector<std::string> problems(const json& doc) {
  return try_load_scenario_text(doc.dump(), "t.json",
                                std::string(KVSHIFT_SOURCE_DIR) + "/scenarios")
      .problems;
}

/// The spec loaded from `doc`; fails the test (by returning an empty spec) on problems.
inline input::ScenarioSpec load(const json& doc) {
  return load_scenario_text(doc.dump(), "t.json", std::string(KVSHIFT_SOURCE_DIR) + "/scenarios");
}

/// A two-node explicit scenario with nothing optional: the smallest valid file.
inline json minimal_json() {
  return json::parse(R"({
    "model": "qwen2.5-0.5b",
    "gpu": "h100",
    "cluster": {
      "nodes": [{"name": "a"}, {"name": "b"}],
      "links": [{"a": "a", "b": "b", "bandwidth": "100Mbps", "latency": "10ms"}]
    },
    "workload": {"arrival": "poisson", "rate": 1, "prompt_tokens": 512, "output_tokens": 16},
    "duration": "10s"
  })");
}

}  // namespace kvshift::input::testing
