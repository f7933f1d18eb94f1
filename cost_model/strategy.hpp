// The move strategies: one row each, read by everything that lists, names or treats them
// (the scenario loader's name table, the move policies, the analytic maps, the report, the
// testbed). A strategy's arithmetic is its case in plan_move (move_plan.cpp).
//
// Adding one: a value in `Strategy`, its row in kStrategyTraits (in enum order), its case in
// plan_move, and its name in scenarios/schema.json and scenarios/README.md (tests fail until
// both list it). CONTRIBUTING.md has the rest.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace kvshift::cost_model {

/// How a move rebuilds the request's KV at its destination.
/// prefix_recompute: ship the KV of the prefix the source holds (a stale replica), recompute
/// the tail. hybrid (Cake): ship the back of the KV while the receiver recomputes the front.
enum class Strategy {
  kFullKv,
  kTokenReplay,
  kRiskKv,
  kProxyKv,
  kPrefixRecompute,
  kHybrid,
  kAdaptive
};

struct StrategyTraits {
  Strategy id;
  const char* name;     ///< in files, flags and reports
  const char* summary;  ///< what it sends and what the receiver does, in one line
  bool concrete;        ///< a plan of its own (adaptive chooses among the concrete ones)
  bool lossy;           ///< pays ΔNLL for the bytes it saves
  bool needs_scores;    ///< its moves need the proxy's importance scores of the request
  bool prompt_replay;   ///< rebuilds all of the KV by a prefill of the token ids
  bool crossover;       ///< ranked by analytic crossover maps (no quality cost or split)
  bool on_testbed;      ///< the testbed executes it between live receivers
};

// clang-format off
inline constexpr StrategyTraits kStrategyTraits[] = {
  // id, name, summary,
  //   concrete, lossy, needs_scores, prompt_replay, crossover, on_testbed
  {Strategy::kFullKv, "full_kv", "ships every layer's KV",
      true, false, false, false, true, true},
  {Strategy::kTokenReplay, "token_replay", "ships the token ids; the receiver prefills them",
      true, false, false, true, true, true},
  {Strategy::kRiskKv, "risk_kv",
      "ships the anchor layers' KV; the receiver rebuilds the rest with the predictors",
      true, true, false, false, true, true},
  {Strategy::kProxyKv, "proxy_kv", "ships the KV of the tokens the proxy scores highest",
      true, true, true, false, false, true},
  {Strategy::kPrefixRecompute, "prefix_recompute",
      "ships the KV of the prefix the source holds; the receiver recomputes the tail",
      true, false, false, false, false, false},
  {Strategy::kHybrid, "hybrid",
      "ships the back of the KV while the receiver recomputes the front from its ids",
      true, false, false, false, false, false},
  {Strategy::kAdaptive, "adaptive",
      "per move, the fastest (strategy, destination) pair the cost model predicts within the "
      "quality budget",
      false, false, true, false, false, false},
};
// clang-format on

constexpr const StrategyTraits& traits(Strategy s) {
  return kStrategyTraits[static_cast<std::size_t>(s)];
}

constexpr const char* strategy_name(Strategy s) { return traits(s).name; }

/// The strategies whose `flag` is set, in table order.
template <bool StrategyTraits::*Flag>
constexpr auto strategies_where() {
  constexpr std::size_t n = [] {
    std::size_t count = 0;
    for (const StrategyTraits& t : kStrategyTraits) count += (t.*Flag) ? 1 : 0;
    return count;
  }();
  std::array<Strategy, n> out{};
  std::size_t i = 0;
  for (const StrategyTraits& t : kStrategyTraits) {
    if (t.*Flag) out[i++] = t.id;
  }
  return out;
}

/// Every strategy a scenario may name, in the order files and messages list them.
inline constexpr auto kAllStrategies = [] {
  std::array<Strategy, std::size(kStrategyTraits)> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = kStrategyTraits[i].id;
  return out;
}();
/// The concrete strategies, in the order adaptive breaks ties.
inline constexpr auto kConcreteStrategies = strategies_where<&StrategyTraits::concrete>();
/// What an analytic crossover map ranks (`sweep --analytic`, its report chart).
inline constexpr auto kCrossoverStrategies = strategies_where<&StrategyTraits::crossover>();

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < std::size(kStrategyTraits); ++i) {
    if (static_cast<std::size_t>(kStrategyTraits[i].id) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kStrategyTraits lists the strategies in enum order");

/// The strategy called `name` (adaptive included); empty for none.
std::optional<Strategy> strategy_named(std::string_view name);

}  // namespace kvshift::cost_model
