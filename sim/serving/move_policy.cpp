// The two move policies: a fixed strategy with its fallbacks, and adaptive.
#include "sim/serving/move_policy.hpp"

#include <utility>

namespace kvshift::sim {
namespace {

using cost_model::MoveCandidate;

MoveChoice chosen(MoveCandidate c, int src, std::string fallback) {
  if (fallback.empty()) fallback = c.plan.note;
  return MoveChoice{std::move(c), src, std::move(fallback)};
}

/// The run's strategy on the first destination it reaches; when it cannot run (infeasible,
/// over the quality budget, or nothing reachable), full KV, then token replay, with the reason.
class FixedStrategy final : public MovePolicy {
 public:
  explicit FixedStrategy(Strategy s) : s_(s) {}

  std::optional<MoveChoice> choose(const MoveAsk& ask, const MovePricer& price) const override {
    std::string why;
    for (int gpu : ask.destinations) {
      MoveCandidate c = price(s_, ask.state, ask.src, gpu);
      if (!c.plan.feasible()) {
        why = c.plan.infeasible;
        break;
      }
      if (ask.quality_budget && c.plan.delta_nll > *ask.quality_budget) {
        why = "its ΔNLL " + std::to_string(c.plan.delta_nll) + " is over the quality budget " +
              std::to_string(*ask.quality_budget);
        break;
      }
      if (c.estimate.reachable) return chosen(std::move(c), ask.src, "");
      why = ask.src >= 0 ? "the source " + ask.src_name + " cannot reach a destination with room"
                         : "the predictor store cannot reach a destination with room";
    }
    for (Strategy s : {Strategy::kFullKv, Strategy::kTokenReplay}) {
      for (int gpu : ask.destinations) {
        MoveCandidate c = price(s, ask.state, ask.src, gpu);
        if (c.plan.feasible() && c.estimate.reachable) {
          return chosen(std::move(c), ask.src,
                        std::string("fallback to ") + strategy_name(c.plan.strategy) + ": " +
                            strategy_name(s_) + " cannot run here (" + why + ")");
        }
      }
    }
    return std::nullopt;
  }
  // A strategy that prunes by the proxy's scores waits for them before a handoff; one that
  // rebuilds by replaying the prompt has nothing to hand off (its handoff is a decode-side
  // prefill).
  bool needs_scores() const override { return cost_model::traits(s_).needs_scores; }
  bool handoff_waits_for_scores() const override { return cost_model::traits(s_).needs_scores; }
  bool prefills_where_it_decodes() const override { return cost_model::traits(s_).prompt_replay; }

 private:
  Strategy s_;
};

/// Every (strategy, destination) pair, each priced against that GPU's own queue; the fastest
/// within the quality budget.
class Adaptive final : public MovePolicy {
 public:
  std::optional<MoveChoice> choose(const MoveAsk& ask, const MovePricer& price) const override {
    std::vector<MoveCandidate> options;
    for (int gpu : ask.destinations) {
      for (Strategy s : cost_model::kConcreteStrategies)
        options.push_back(price(s, ask.state, ask.src, gpu));
    }
    if (const auto best = cost_model::pick_fastest(options, ask.quality_budget)) {
      return chosen(std::move(options[*best]), ask.src, "");
    }
    return std::nullopt;
  }
  // Scores make ProxyKV one of its candidates; a handoff does not wait for them (ProxyKV is
  // then simply not yet feasible).
  bool needs_scores() const override {
    return cost_model::traits(Strategy::kAdaptive).needs_scores;
  }
  bool handoff_waits_for_scores() const override { return false; }
  bool prefills_where_it_decodes() const override { return false; }
};

}  // namespace

std::unique_ptr<MovePolicy> make_move_policy(Strategy strategy) {
  if (strategy == Strategy::kAdaptive) return std::make_unique<Adaptive>();
  return std::make_unique<FixedStrategy>(strategy);
}

MoveChoice replay_from_router(const MoveAsk& ask, const MovePricer& price) {
  cost_model::MoveState none = ask.state;
  none.source = cost_model::SourceKv::kNone;
  return chosen(price(Strategy::kTokenReplay, none, -1, ask.destinations.front()), -1,
                "replay from the router's token ids: no destination is reachable from the " +
                    std::string(ask.src >= 0 ? "source" : "replica"));
}

}  // namespace kvshift::sim
