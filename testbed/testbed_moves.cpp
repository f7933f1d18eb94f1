// Move selection: which strategies, between which nodes, at which contexts.
#include "testbed/testbed_moves.hpp"

#include <algorithm>

#include "cost_model/input_error.hpp"
#include "sim/workload.hpp"
#include "testbed/move_setup.hpp"

namespace kvshift::testbed {
namespace {

using cost_model::Strategy;

/// The prompts of the requests a run of the scenario simulates, in arrival order, as the
/// simulator draws them (its workload stream: same seed, same numbers); from the first again
/// when more moves than requests are asked for.
class ScenarioPrompts {
 public:
  explicit ScenarioPrompts(const input::ScenarioSpec& spec)
      : spec_(spec), arrivals_(sim::scenario_workload(spec)) {}
  std::int64_t next() {
    std::optional<sim::RequestArrival> a = arrivals_.next();
    if (!a) {
      arrivals_ = sim::scenario_workload(spec_);
      a = arrivals_.next();
    }
    if (!a) throw InputError("workload: no request arrives within the scenario's duration");
    return a->prompt_tokens;
  }

 private:
  const input::ScenarioSpec& spec_;
  sim::Workload arrivals_;
};

/// The other GPU node reached with the least latency (ties: the first listed).
std::string nearest(const std::string& src, const std::vector<std::string>& gpus,
                    const ClusterLinks& links) {
  std::string best;
  auto best_latency = std::chrono::nanoseconds::max();
  for (const auto& g : gpus) {
    if (g == src) continue;
    const auto l = links.path(src, g).latency;
    if (l < best_latency) best_latency = l, best = g;
  }
  return best;
}

}  // namespace

std::vector<Strategy> testbed_strategies(const input::ScenarioSpec& spec) {
  std::vector<Strategy> out;
  auto add = [&](Strategy s) {
    if (s == Strategy::kRiskKv && !(spec.risk_kv && !spec.risk_kv->omission.empty())) return;
    if (s == Strategy::kProxyKv && !spec.proxy_kv) return;
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  // The testbed moves live KV between running receivers; it does not yet split a move
  // between the wire and the receiver's prefill, and a live source has no stale prefix.
  auto runs_here = [](Strategy s) { return cost_model::traits(s).on_testbed; };
  for (Strategy s : spec.policies.strategies) {
    if (!cost_model::traits(s).concrete) {  // adaptive: whichever of them it picks
      for (Strategy c : cost_model::kConcreteStrategies) {
        if (runs_here(c)) add(c);
      }
    } else if (!runs_here(s)) {
      throw InputError(std::string("policies.strategies: the testbed does not run \"") +
                       cost_model::strategy_name(s) + "\" (the simulator and `kvshift cost` do)");
    } else {
      add(s);
    }
  }
  return out;
}

std::vector<PlannedMove> choose_moves(const input::ScenarioSpec& spec, const ClusterLinks& links,
                                      std::int64_t synthetic, std::int64_t max_tokens,
                                      std::uint64_t seed) {
  const std::vector<std::string> gpus = gpu_names(spec);
  const std::vector<Strategy> strategies = testbed_strategies(spec);
  sim::Rng rng(seed);  // which nodes the synthetic moves join
  ScenarioPrompts prompts(spec);
  std::vector<PlannedMove> moves;
  auto context = [&](PlannedMove& m) {
    const std::int64_t t = std::max<std::int64_t>(1, prompts.next());
    m.clipped = t > max_tokens;
    m.tokens = std::min(t, max_tokens);
  };
  if (synthetic > 0) {
    for (std::int64_t i = 0; i < synthetic; ++i) {
      PlannedMove m;
      m.strategy = strategies[static_cast<std::size_t>(i) % strategies.size()];
      const auto n = static_cast<std::int64_t>(gpus.size());
      const auto a = static_cast<std::size_t>(rng.uniform_int(0, n - 1));
      auto b = static_cast<std::size_t>(rng.uniform_int(0, n - 2));
      if (b >= a) ++b;
      m.src = gpus[a];
      m.dst = gpus[b];
      context(m);
      moves.push_back(m);
    }
    return moves;
  }
  for (const sim::EventSpec& e : spec.events) {
    // A drain live-migrates the node's requests: the node itself is the KV source. (A failure's
    // recovery reads a replica held elsewhere; the testbed does not replay those.)
    if (e.kind != sim::EventKind::kDrain ||
        std::find(gpus.begin(), gpus.end(), e.node) == gpus.end())
      continue;
    for (Strategy s : strategies) {
      PlannedMove m;
      m.strategy = s;
      m.src = e.node;
      m.dst = nearest(e.node, gpus, links);
      context(m);
      moves.push_back(m);
    }
  }
  if (moves.empty()) {
    throw InputError(
        "--moves: the scenario has no drain of a GPU node to replay;"
        " ask for synthetic moves with --moves N");
  }
  return moves;
}

}  // namespace kvshift::testbed
