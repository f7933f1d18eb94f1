// Capacity search (`kvshift search`): the least (or, with Want::kMost, the
// largest) value of one knob for which an objective holds. Bandwidths,
// durations and byte sizes are searched on a log scale (geometric midpoints),
// plain numbers on a linear one (integers stay integers). Every probe is a full
// simulation of the one chosen strategy with the scenario's own seed, so probes
// differ only in the knob (common random numbers).
//
// Order: HI, then LO. When the wanted end already meets the objective it is the
// answer (no assumption needed). Otherwise the three quarter points of the range
// are probed too, and the met/not-met pattern in knob order decides:
//  - one switch: the objective is taken as monotone over the range and the
//    switching bracket is bisected until it is within the tolerance (or the
//    probe budget is spent); the answer is the met end of the final bracket;
//  - no value met: there is no answer;
//  - more than one switch (met, then not, then met again, or a window met only
//    inside): the objective is not monotone here, so the search says so and
//    probes an even grid over the range instead; the answer is the least (or
//    largest) grid value that meets it, and the met stretches are reported.
// What it leaves out: a non-monotone stretch narrower than the quarter spacing
// that lies inside a single-switch bracket goes unseen, as it would in any
// bisection.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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

/// Which value of the knob answers the search.
enum class Want { kLeast, kMost };

/// Parses --want ("least" or "most"); throws InputError naming --want.
Want parse_want(std::string_view text);

/// Parses "POINTER=LO..HI" (units decide the kind); throws InputError naming --vary.
Knob parse_knob(std::string_view text);

/// The value as written into the scenario ("1234567bps", "0.5s", "4096B", "8").
std::string knob_value_text(const Knob& knob, double value);
/// The value for people ("1.235 Gbps").
std::string knob_value_display(const Knob& knob, double value);

/// What the probed strategy's moves actually did, read from the run's move counters.
struct ProbeMoves {
  std::int64_t fallbacks = 0;   ///< moves that fell back to another strategy (moves.fallbacks)
  std::int64_t unfinished = 0;  ///< moves still open when the run ended
  std::int64_t failed = 0;      ///< moves that failed
  std::map<std::string, std::int64_t> executed;  ///< done moves by the strategy that ran them
};

struct Probe {
  double value = 0;
  bool met = false;
  std::vector<ClauseResult> results;
  ProbeMoves moves;
  bool grid = false;  ///< probed by the grid after a non-monotone pattern
};

struct SearchSettings {
  Knob knob;
  Objective objective;
  std::string strategy;  ///< the one strategy simulated
  Want want = Want::kLeast;
  double tolerance = 0.02;  ///< relative (log scale) or absolute share of HI-LO (linear)
  int max_probes = 24;
};

/// A stretch of probed values, in knob order, that all met the objective.
struct MetStretch {
  double from = 0, to = 0;
};

struct SearchResult {
  std::vector<Probe> probes;     ///< in the order run
  std::optional<double> answer;  ///< the least (or largest) value known to meet the objective
  /// The probed value next to the answer, on the side the search looked, that does not meet it
  /// (empty when the answer is an end of the range).
  std::optional<double> nearest_unmet;
  bool monotone = true;  ///< false: in knob order the probes switched met/not met twice or more
  std::vector<MetStretch> met_stretches;  ///< every probed stretch that met (in knob order)
};

/// The probe at `value`, or nullptr.
const Probe* probe_at(const SearchResult& result, double value);

/// Chooses the strategy: `wanted` if given (must be in the scenario), else "adaptive"
/// when the scenario lists it, else its first strategy.
std::string choose_strategy(const nlohmann::json& scenario, const std::string& wanted);

/// Throws InputError naming --strategy when the scenario cannot run `strategy` (an unknown name,
/// or one its sections do not support); other problems are left to the probes.
void check_strategy(const SweepPlan& plan, const std::string& strategy);

/// Runs the search on `plan.base` (plan.axes are ignored); `on_probe` sees each probe as it ends.
SearchResult capacity_search(const SweepPlan& plan, const SearchSettings& settings,
                             const CostFactory& costs,
                             const std::function<void(const Probe&)>& on_probe = {});

}  // namespace kvshift::sweep
