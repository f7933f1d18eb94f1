// RISK-KV group selection (ARCHITECTURE.md, "RISK-KV", Algorithm 1): order groups by risk
// per saved byte, evaluate the prefixes {π1..πk} jointly, gate each prefix and
// choose the accepted prefix that omits the most KV (ties: the lower mean
// ΔNLL, then the shorter prefix). No accepted prefix means "omit nothing".
// Every gate's acceptance only loosens as ε grows, so a looser ε never omits
// less under the same gate. Pure bookkeeping over measured numbers; which
// requests are measured is crossfit.hpp, the measuring calibration.cpp.
#pragma once

#include <optional>
#include <vector>

#include "backend/calibrate/gates.hpp"

namespace kvshift::backend::calibrate {

/// One candidate group measured alone.
struct SingleRisk {
  int group = 0;             ///< 1-based
  double risk = 0.0;         ///< ρ_g = mean ΔNLL over the selection requests
  double saved_bytes = 0.0;  ///< KV bytes per request its omission saves
};

/// Candidate groups ordered by ρ_g / saved bytes, ascending (ties: lower group first).
std::vector<int> order_by_risk_per_byte(const std::vector<SingleRisk>& singles);

/// One evaluated prefix.
struct PrefixOutcome {
  std::vector<int> groups;                ///< π1..πk
  double omitted_bytes = 0.0;             ///< per request
  double mean = 0.0;                      ///< mean ΔNLL on the selection set
  double upper90 = 0.0;                   ///< bootstrap one-sided 90 % bound on the selection set
  std::optional<double> confirm_upper90;  ///< the same on the confirmation set (stable-split)
  std::vector<double> deltas;             ///< ΔNLL_r on the selection (gate) set: the share gate
};

/// Whether `p` passes `rule` at `eps` (stable-split needs confirm_upper90, share needs deltas).
bool passes(const PrefixOutcome& p, const GateRule& rule, double eps);

/// Index of the chosen prefix, or nullopt for "omit nothing".
std::optional<std::size_t> choose_prefix(const std::vector<PrefixOutcome>& prefixes,
                                         const GateRule& rule, double eps);

}  // namespace kvshift::backend::calibrate
