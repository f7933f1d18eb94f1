// MovePolicy: how a run's strategy picks one move among priced candidates.
//
// The serving model asks; a policy answers with a plan, its destination and,
// when the plan is not what the run asked for, why. A policy also says what
// pre-work its moves need (the proxy's scores), so the prefill and handoff
// code never test strategy names. Pricing stays with the caller (a MovePricer
// runs the cost model against the live cluster), so a policy is a pure choice
// that a test can drive with a table of prices.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/move_plan.hpp"
#include "sim/spec.hpp"

namespace kvshift::sim {

/// What a move may choose from.
struct MoveAsk {
  cost_model::MoveState state;           ///< the request's KV and what the source holds
  int src = -1;                          ///< node the bytes come from (-1: none)
  std::string src_name;                  ///< that node's name, for messages
  std::vector<int> destinations;         ///< candidate GPUs, the router's order first
  std::optional<double> quality_budget;  ///< the run's ΔNLL ceiling per move, if any
};

/// Plans and prices strategy `s` from node `src` (-1: none) onto GPU `gpu`.
using MovePricer = std::function<cost_model::MoveCandidate(
    Strategy s, const cost_model::MoveState& state, int src, int gpu)>;

/// The move a policy chose.
struct MoveChoice {
  cost_model::MoveCandidate option;  ///< plan, estimate and destination GPU
  int src = -1;                      ///< node the bytes come from (-1: none)
  std::string fallback;              ///< why the plan differs from the run's strategy
};

class MovePolicy {
 public:
  virtual ~MovePolicy() = default;
  /// The chosen move, or nothing when no candidate the source can reach runs (the caller then
  /// replays from the router's token ids: replay_from_router).
  virtual std::optional<MoveChoice> choose(const MoveAsk& ask, const MovePricer& price) const = 0;
  /// Whether a request's prefill starts the proxy's scoring (for deployments with a proxy).
  virtual bool needs_scores() const = 0;
  /// Whether a prefill->decode handoff waits for those scores before it moves.
  virtual bool handoff_waits_for_scores() const = 0;
  /// Whether requests prefill in the decode pools they are served from (no prefill->decode
  /// handoff: token replay's handoff is a decode-side prefill).
  virtual bool prefills_where_it_decodes() const = 0;
};

/// The policy of a run's strategy: adaptive weighs every (strategy, destination) pair; any
/// other strategy takes the first destination it reaches, else falls back to full KV, then
/// token replay.
std::unique_ptr<MovePolicy> make_move_policy(Strategy strategy);

/// Token replay onto the first destination from the token ids the router holds: the move when
/// nothing the source can reach runs.
MoveChoice replay_from_router(const MoveAsk& ask, const MovePricer& price);

}  // namespace kvshift::sim
