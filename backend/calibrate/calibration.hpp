// The RISK-KV calibration procedure on one model (ARCHITECTURE.md,
// "RISK-KV"; issues 6 and 13): requests from a corpus → ridge predictors fitted
// on the fit set (one per (group, anchors) pair the search needs, cached) →
// cross-fitted selection (crossfit.hpp): each candidate group alone on the
// order set gives the order π, the prefixes of π are measured and gated on the
// disjoint selection set → for every gate and every ε of the frontier grid the
// accepted prefix that omits the most KV → held-out test-set quality of every
// topology any row chose: mean ΔNLL with CI, Upper-90, the share of requests
// over that row's ε with a Clopper–Pearson CI, and whether the row's gate,
// re-applied to the test set, still holds. Returns everything the reports
// need; writes no files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/calibrate/corpus.hpp"
#include "backend/calibrate/crossfit.hpp"
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
  GateRule gate = Gate::kUpper90;
  double frontier_share = 0.10;  ///< the share gate's s in the frontier (when --gate is not share)
  /// The frontier's ε grid (options.eps is added).
  std::vector<double> frontier_eps = {0.001, 0.002, 0.005, 0.01};
  std::uint64_t seed = 1;
  int resamples = kMinResamples;
  std::vector<int> candidates;  ///< 1-based groups; empty: every interior group
  int group_width = 2;
  int anchor_width = 2;
  /// First rows of every request sent exact in omitted layers (GroupPredictor::sink_rows).
  int sink_rows = 0;
  /// How the candidates are ordered on the order set (OrderRule::kGreedy: each next group
  /// measured beside those chosen; two to three times the order set's passes).
  OrderRule order_rule = OrderRule::kRiskPerByte;
  int threads = 1;
  std::vector<double> alphas = default_alpha_grid();
};

/// Quality of one topology on the test set, the share over `eps` counted at its row's ε.
struct TestQuality {
  std::vector<int> groups;        ///< omitted groups (empty: omit nothing)
  double omitted_fraction = 0.0;  ///< omitted layers / layers
  double ppl_exact = 0.0;
  double ppl_reconstructed = 0.0;
  double delta_nll_mean = 0.0;
  double ci95_low = 0.0, ci95_high = 0.0;
  double upper90 = 0.0;  ///< one-sided 90 % bootstrap bound of the mean
  double eps = 0.0;      ///< the ε the share below is counted at
  int violations = 0;    ///< requests with ΔNLL_r > eps
  double violation_share = 0.0;
  double share_ci95_low = 0.0, share_ci95_high = 0.0;  ///< Clopper–Pearson, two-sided 95 %
  double share_upper90 = 0.0;  ///< Clopper–Pearson, one-sided 90 % (the share gate's bound)
  int requests = 0;
  std::vector<double> per_request;  ///< ΔNLL_r
};

/// One frontier row: which topology a gate chose at an ε, and how it does on the test set.
struct GateChoice {
  GateRule rule;
  double eps = 0.0;
  std::optional<std::size_t> prefix;  ///< index into prefixes; nullopt: omit nothing
  TestQuality test;
  bool holds = false;  ///< the rule re-applied to the test set at eps accepts the choice
};

struct CalibrationResult {
  CalibrationOptions options;
  std::vector<SingleRisk> singles;                 ///< candidates alone (order set)
  std::vector<std::vector<double>> single_deltas;  ///< ΔNLL_r per single (order set)
  std::vector<int> order;                          ///< π, by options.order_rule
  std::vector<double> order_means;  ///< kGreedy: mean ΔNLL of π1..πk on the order set
  int order_measurements = 0;       ///< kGreedy: topologies measured for the order
  double order_stop = 0.0;  ///< kGreedy: the order set's mean past which it stopped measuring
  std::vector<PrefixOutcome> prefixes;  ///< {π1..πk} measured on the selection set
  bool cross_fitted = false;            ///< π from requests the gates never see
  std::string stop_reason;              ///< why longer prefixes were not measured
  /// The frontier: the chosen row (options.gate at options.eps) first, then every rule at
  /// every ε of the grid, rule by rule, ε ascending.
  std::vector<GateChoice> gates;
  std::vector<FittedGroup> predictors;  ///< the chosen topology's folded predictors
  std::size_t fits = 0;                 ///< (group, anchors) pairs fitted
  std::vector<std::pair<std::string, double>> stage_seconds;  ///< in the order run
  double exact_nll_select = 0.0;  ///< mean exact NLL on the selection (gate) set
  /// The choice of options.gate.
  const GateChoice& chosen() const { return gates.front(); }
};

/// Progress: stage label, units done, units expected in all.
using ProgressFn = std::function<void(const std::string&, std::int64_t, std::int64_t)>;

/// Every group of a `layers`-layer model with at least `anchor_width` layers on each side: it
/// keeps its exact anchors whatever else among these groups is omitted (they all leave the
/// layers beside the first and the last of them). With anchors no wider than the groups and
/// the layers a whole number of groups: all but the first and the last group.
std::vector<int> interior_groups(int layers, int group_width, int anchor_width);

/// The fewer of the layers before and after `group` (1-based).
int anchor_room(int layers, int group_width, int group);

/// Runs the whole procedure. Throws InputError for bad options or data (corpus too short,
/// vocabulary mismatch, singular/NaN fit).
CalibrationResult run_calibration(const Model& model, std::span<const std::int32_t> corpus,
                                  const CalibrationOptions& options,
                                  const ProgressFn& progress = {});

}  // namespace kvshift::backend::calibrate
