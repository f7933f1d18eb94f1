// Capacity search (`kvshift search`): the smallest value of one knob for which
// an objective holds, by bisection, assuming the objective is monotone in the
// knob (met above some threshold, not below). Bandwidths, durations and byte
// sizes are bisected on a log scale (geometric midpoints), plain numbers on a
// linear one (integers stay integers). Every probe is a full simulation of the
// one chosen strategy with the scenario's own seed, so probes differ only in
// the knob (common random numbers). Order: HI first (if even HI fails, there is
// no answer), then LO (if LO already meets it, LO is the answer), then midpoints
// until the bracket is within the tolerance or the probe budget is spent.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sweep/objective.hpp"
#include "sweep/sweep_plan.hpp"

namespace kvshift::sweep {

enum class KnobKind { kBandwidth, kDuration, kBytes, kNumber };

struct Knob {
  std::string pointer;
  KnobKind kind = KnobKind::kNumber;
  bool integer = false;   ///< plain numbers: both ends were integers
  double lo = 0, hi = 0;  ///< in bit/s, seconds, bytes or plain
};

/// Parses "POINTER=LO..HI" (units decide the kind); throws InputError naming --vary.
Knob parse_knob(std::string_view text);

/// The value as written into the scenario ("1234567bps", "0.5s", "4096B", "8").
std::string knob_value_text(const Knob& knob, double value);
/// The value for people ("1.235 Gbps").
std::string knob_value_display(const Knob& knob, double value);

struct Probe {
  double value = 0;
  bool met = false;
  std::vector<ClauseResult> results;
};

struct SearchSettings {
  Knob knob;
  Objective objective;
  std::string strategy;     ///< the one strategy simulated
  double tolerance = 0.02;  ///< relative (log scale) or absolute share of HI-LO (linear)
  int max_probes = 24;
};

struct SearchResult {
  std::vector<Probe> probes;     ///< in the order run
  std::optional<double> answer;  ///< smallest value known to meet the objective
  std::optional<double> below;   ///< largest value known not to
};

/// Chooses the strategy: `wanted` if given (must be in the scenario), else "adaptive"
/// when the scenario lists it, else its first strategy.
std::string choose_strategy(const nlohmann::json& scenario, const std::string& wanted);

/// Runs the search on `plan.base` (plan.axes are ignored); `on_probe` sees each probe as it ends.
SearchResult capacity_search(const SweepPlan& plan, const SearchSettings& settings,
                             const CostFactory& costs,
                             const std::function<void(const Probe&)>& on_probe = {});

}  // namespace kvshift::sweep
