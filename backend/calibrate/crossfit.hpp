// Cross-fitted topology selection (issue 13). The selection requests are cut
// into two disjoint parts: the ORDER set, on which every candidate group is
// measured alone and the order π (risk per saved byte) is estimated, and the
// GATE set, on which the prefixes {π1..πk} are measured jointly and gated. A
// request is never used both to order and to gate, so the gate sees the chosen
// prefix on requests that did not make it look good (the winner's curse of
// ordering and gating on the same requests is gone), and the prefix that is
// gated is exactly the topology that ships (no refit on pooled data).
//
// Why this split and not K-fold: a single alone costs one probe pass per
// request and candidate (13 for SmolLM2), a prefix one per request and prefix;
// K-fold would need the singles on every selection request, doubling the
// passes per request, while the order only needs a coarse ranking. At the same
// wall time the split gives the gate (and the test) more requests, and power
// is what the gates lack. With no order requests the order is estimated on the
// gate set itself: the old, in-sample procedure, reported as not cross-fitted.
//
// Prefixes are measured one k at a time; after `patience` consecutive prefixes
// that no rule accepts at the loosest ε, longer ones are not measured (every
// choice is then among the measured ones, for every ε of the frontier alike).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "backend/calibrate/gates.hpp"
#include "backend/calibrate/selection.hpp"

namespace kvshift::backend::calibrate {

/// What the selection may ask of the measuring side. Request ids name requests of one pool.
class SelectionOracle {
 public:
  virtual ~SelectionOracle() = default;
  /// deltas[t][i]: ΔNLL of topology t (its groups omitted together) on request requests[i].
  virtual std::vector<std::vector<double>> measure(const std::vector<std::vector<int>>& topologies,
                                                   const std::vector<std::size_t>& requests) = 0;
  /// False when omitting `groups` together leaves a group without anchors.
  virtual bool feasible(const std::vector<int>& groups) const = 0;
  /// KV bytes per request that omitting `groups` saves.
  virtual double saved_bytes(const std::vector<int>& groups) const = 0;
};

/// How the order π is formed on the order set.
enum class OrderRule {
  /// Each candidate measured alone, ascending risk per saved byte (ARCHITECTURE.md, Algorithm 1).
  kRiskPerByte,
  /// Greedy: each next group the one whose ΔNLL *beside the groups already chosen* costs least
  /// per saved byte. Omitting neighbours costs more than their single risks add up to (a run of
  /// omitted layers is rebuilt from anchors further away), which single risks cannot see. Lazy
  /// (CELF): a group's cost beside fewer groups stands in until it reaches the top, then it is
  /// measured beside the current choice; a cost measured beside the current choice is taken.
  /// Two to three measurements per group on the order set instead of one.
  kGreedy,
};

/// "risk-per-byte", "greedy".
std::string_view to_string(OrderRule r);
/// Parses to_string's names; InputError naming `flag` otherwise.
OrderRule parse_order_rule(std::string_view name, const std::string& flag);

struct SelectionInput {
  std::vector<int> candidates;                ///< 1-based groups
  std::vector<std::size_t> order_requests;    ///< empty: order on the gate set (in-sample)
  std::vector<std::size_t> gate_requests;     ///< non-empty
  std::vector<std::size_t> confirm_requests;  ///< stable-split's confirmation set (may be empty)
  std::vector<GateRule> rules;                ///< for the stopping rule
  double eps_max = 0.01;                      ///< the loosest ε any choice will be made at
  int resamples = kMinResamples;
  std::uint64_t seed = 1;
  int patience = 2;
  OrderRule order_rule = OrderRule::kRiskPerByte;
  /// kGreedy: once the chosen groups' mean ΔNLL on the order set exceeds this, the rest follow
  /// by their last measured cost per byte, unmeasured beside the choice (they would not pass).
  double order_stop = std::numeric_limits<double>::infinity();
};

struct SelectionOutcome {
  std::vector<SingleRisk> singles;                 ///< on the order set, in candidate order
  std::vector<std::vector<double>> single_deltas;  ///< ΔNLL_r per single (order set)
  std::vector<int> order;                          ///< π
  /// kGreedy: mean ΔNLL of π1..πk together on the order set, k = 1.. as far as measured.
  std::vector<double> order_means;
  int order_measurements = 0;  ///< kGreedy: topologies measured beside a choice (order set)
  std::vector<PrefixOutcome> prefixes;  ///< measured prefixes, k = 1..
  bool cross_fitted = false;            ///< order and gate sets disjoint
  std::string stop_reason;              ///< why no longer prefix was measured
};

/// Runs the selection. Throws std::invalid_argument if the order and gate sets overlap
/// (they must be disjoint or the order set empty) or the gate set is empty.
SelectionOutcome select_prefixes(SelectionOracle& oracle, const SelectionInput& in);

}  // namespace kvshift::backend::calibrate
