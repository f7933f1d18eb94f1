// The RISK-KV calibration procedure on one model (DESIGN.md, "RISK-KV in
// detail"; issue 6): requests from a corpus → ridge predictors fitted on the
// fit set (one per (group, anchors) pair the search needs, cached) → ΔNLL risk
// of each candidate group alone on the selection set → prefixes in order of
// risk per saved byte, evaluated jointly → quality gates → the accepted prefix
// that omits the most KV → held-out test-set quality for the choice of each
// gate. Returns everything the reports need; writes no files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/calibrate/corpus.hpp"
#include "backend/calibrate/fit_data.hpp"
#include "backend/calibrate/gates.hpp"
#include "backend/calibrate/selection.hpp"
#include "backend/model.hpp"

namespace kvshift::backend::calibrate {

struct CalibrationOptions {
  std::int64_t history = 512;  ///< tokens whose KV may be reconstructed
  std::int64_t eval = 512;     ///< teacher-forced tokens scored after the history
  RequestCounts counts;
  double eps = 0.002;  ///< ΔNLL budget (nats/token)
  Gate gate = Gate::kUpper90;
  std::uint64_t seed = 1;
  int resamples = kMinResamples;
  std::vector<int> candidates;  ///< 1-based groups; empty: every interior group
  int group_width = 2;
  int anchor_width = 2;
  int threads = 1;
  std::vector<double> alphas = default_alpha_grid();
};

/// Quality of one topology on the test set.
struct TestQuality {
  std::vector<int> groups;        ///< omitted groups (empty: omit nothing)
  double omitted_fraction = 0.0;  ///< omitted layers / layers
  double ppl_exact = 0.0;
  double ppl_reconstructed = 0.0;
  double delta_nll_mean = 0.0;
  double ci95_low = 0.0, ci95_high = 0.0;
  double violation_rate = 0.0;  ///< share of requests with ΔNLL_r > eps
  int requests = 0;
  std::vector<double> per_request;  ///< ΔNLL_r
};

/// Which topology a gate chose, and how it does on the test set.
struct GateChoice {
  Gate gate = Gate::kUpper90;
  std::optional<std::size_t> prefix;  ///< index into prefixes; nullopt: omit nothing
  TestQuality test;
};

struct CalibrationResult {
  CalibrationOptions options;
  std::vector<SingleRisk> singles;                 ///< candidates alone, in candidate order
  std::vector<std::vector<double>> single_deltas;  ///< ΔNLL_r per single
  std::vector<int> order;                          ///< π: groups by risk per saved byte
  std::vector<PrefixOutcome> prefixes;             ///< {π1..πk}, k = 1..G
  std::vector<GateChoice> gates;        ///< one per gate evaluated (the chosen gate first)
  std::vector<FittedGroup> predictors;  ///< the chosen topology's folded predictors
  std::size_t fits = 0;                 ///< (group, anchors) pairs fitted
  std::vector<std::pair<std::string, double>> stage_seconds;  ///< in the order run
  double exact_nll_select = 0.0;  ///< mean exact NLL on the selection set
  /// The choice of options.gate.
  const GateChoice& chosen() const { return gates.front(); }
};

/// Progress: stage label, units done, units expected in all.
using ProgressFn = std::function<void(const std::string&, std::int64_t, std::int64_t)>;

/// Every interior group of a `layers`-layer model (all but the first and the last).
std::vector<int> interior_groups(int layers, int group_width);

/// Runs the whole procedure. Throws InputError for bad options or data (corpus too short,
/// vocabulary mismatch, singular/NaN fit).
CalibrationResult run_calibration(const Model& model, std::span<const std::int32_t> corpus,
                                  const CalibrationOptions& options,
                                  const ProgressFn& progress = {});

}  // namespace kvshift::backend::calibrate
