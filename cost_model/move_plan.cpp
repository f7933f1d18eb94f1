#include "cost_model/move_plan.hpp"

#include <algorithm>
#include <cmath>

#include "cost_model/storage.hpp"

namespace kvshift::cost_model {
namespace {

bool has_risk_kv(const MoveMethods& m) { return m.omission && !m.omission->empty(); }

const char* source_name(SourceKv s) {
  switch (s) {
    case SourceKv::kNone:
      return "no KV";
    case SourceKv::kFull:
      return "the full KV";
    case SourceKv::kKeptLayers:
      return "a RISK-KV replica (kept layers only)";
    case SourceKv::kKeptTokens:
      return "a ProxyKV replica (kept tokens only)";
  }
  return "?";
}

// Which source a strategy can rebuild from: the full KV serves every strategy;
// a lossy replica only the strategy that made it.
bool serves(SourceKv source, Strategy s) {
  switch (source) {
    case SourceKv::kNone:
      return false;
    case SourceKv::kFull:
      return true;
    case SourceKv::kKeptLayers:
      return s == Strategy::kRiskKv;
    case SourceKv::kKeptTokens:
      return s == Strategy::kProxyKv;
  }
  return false;
}

MovePlan replay_plan(const MoveState& st) {
  MovePlan p;
  p.strategy = Strategy::kTokenReplay;
  // Ids held at a node are shipped from it; without a source the router holds them.
  p.tokens = st.source == SourceKv::kNone ? Bytes{} : token_id_bytes(st.context);
  p.replay_tokens = st.context;
  return p;
}

}  // namespace

std::optional<Strategy> strategy_named(std::string_view name) {
  for (Strategy s : kAllStrategies) {
    if (name == strategy_name(s)) return s;
  }
  return std::nullopt;
}

Bytes predictor_bytes(const MoveMethods& m) {
  if (!has_risk_kv(m)) return {};
  return storage(*m.model, *m.omission, 1, {m.predictor_dtype, 1}).predictor_bytes_total;
}

namespace {

/// What strategy `s` ships and rebuilds when the source holds the KV of the first `available`
/// tokens (the rest is the tail it recomputes from its ids).
MovePlan ship_plan(Strategy s, const MoveMethods& methods, const MoveState& st,
                   std::int64_t available, MovePlan p) {
  const Bytes full = kv_bytes(*methods.model, available);
  p.kv_tokens = available;
  p.replay_tokens = st.context - available;    // the tail the source never held
  p.tokens = token_id_bytes(p.replay_tokens);  // recomputing the tail needs its ids
  const int layers = methods.model->layers;
  switch (s) {
    case Strategy::kFullKv:
    case Strategy::kPrefixRecompute:
    case Strategy::kHybrid:  // until balance_hybrid moves its front to the receiver
      p.kv = full;
      p.descriptors = kv_descriptors(methods.engine, available, layers);
      break;
    case Strategy::kRiskKv:
      p.kv = storage(*methods.model, *methods.omission, available, {}).kv_kept;
      p.descriptors =
          kv_descriptors(methods.engine, available, layers - methods.omission->omitted_layers());
      if (const int sink = methods.omission->sink_rows(); sink > 0 && available > 0) {
        // The omitted layers' sink rows travel as their own blocks.
        p.descriptors += kv_descriptors(methods.engine, std::min<std::int64_t>(sink, available),
                                        methods.omission->omitted_layers());
      }
      p.predictor = st.predictor_at_dst ? Bytes{} : predictor_bytes(methods);
      p.reconstruct_tokens = available;
      p.delta_nll = methods.risk_delta_nll_by_context.empty()
                        ? methods.risk_delta_nll
                        : delta_nll_at_context(methods.risk_delta_nll_by_context, st.context);
      break;
    case Strategy::kProxyKv: {
      const double kept = *methods.retention * static_cast<double>(available);
      p.kv = Bytes{std::llround(*methods.retention * static_cast<double>(full.count))};
      // The kept tokens are compacted into whole blocks before they are sent.
      p.descriptors = kv_descriptors(methods.engine, std::llround(kept), layers);
      p.delta_nll = methods.proxy_delta_nll_by_context.empty()
                        ? methods.proxy_delta_nll
                        : delta_nll_at_context(methods.proxy_delta_nll_by_context, st.context);
      break;
    }
    case Strategy::kTokenReplay:
    case Strategy::kAdaptive:
      break;
  }
  return p;
}

}  // namespace

MovePlan plan_move(Strategy s, const MoveMethods& methods, const MoveState& st) {
  if (const std::int64_t cached = std::clamp<std::int64_t>(st.dst_cached, 0, st.context - 1);
      cached > 0) {
    // The destination holds the prefix: plan the rest as a request of its own.
    MoveState rest = st;
    rest.context = st.context - cached;
    rest.available = std::max<std::int64_t>(0, std::min(st.available, st.context) - cached);
    rest.dst_cached = 0;
    rest.dst_cached_load_ns = 0;
    MovePlan p = plan_move(s, methods, rest);
    p.cached_tokens = cached;
    p.cached_load_ns = std::max<std::int64_t>(0, st.dst_cached_load_ns);
    return p;
  }
  const std::int64_t available = std::clamp<std::int64_t>(st.available, 0, st.context);
  MovePlan p;
  p.strategy = s;
  if (s == Strategy::kTokenReplay || s == Strategy::kAdaptive) {
    p = replay_plan(st);
    if (s == Strategy::kAdaptive) p.infeasible = "adaptive is a choice among plans, not a plan";
    return p;
  }
  if (s == Strategy::kRiskKv && !has_risk_kv(methods)) {
    p.infeasible = "the scenario has no RISK-KV topology";
    return p;
  }
  if (s == Strategy::kProxyKv && !methods.retention) {
    p.infeasible = "the scenario has no ProxyKV section";
    return p;
  }
  if (s == Strategy::kProxyKv && !st.scored) {
    p.infeasible = "the request's ProxyKV scores are not computed yet";
    return p;
  }
  if (st.source == SourceKv::kNone || available == 0) {
    MovePlan r = replay_plan(st);
    r.note = std::string(strategy_name(s)) + " had no KV of this request at the source: replay";
    return r;
  }
  if (!serves(st.source, s)) {
    p.infeasible = std::string("the source holds ") + source_name(st.source);
    return p;
  }
  // Whether the source holds every token decides between shipping all and recomputing a tail.
  const std::string held = std::to_string(available) + " of " + std::to_string(st.context);
  if (s == Strategy::kFullKv && available < st.context) {
    MovePlan r = plan_move(Strategy::kPrefixRecompute, methods, st);
    r.note = "full_kv: the source holds the KV of " + held +
             " tokens: prefix_recompute ships it and recomputes the tail";
    return r;
  }
  if (s == Strategy::kPrefixRecompute && available == st.context) {
    MovePlan r = plan_move(Strategy::kFullKv, methods, st);
    r.note = "prefix_recompute: the source holds the KV of all " + held +
             " tokens, there is no tail to recompute: full_kv";
    return r;
  }
  return ship_plan(s, methods, st, available, std::move(p));
}

MoveRoute make_route(const MovePlan& plan, int src, int predictor_src, int dst,
                     BitsPerSecond host_link, const PathFinder& path_to) {
  MoveRoute route;
  route.host_link = host_link;
  auto leg = [&](int from, MoveRoute::Leg& kind, Path& path) {
    if (from < 0) {
      kind = MoveRoute::Leg::kNone;
    } else if (from == dst) {
      kind = MoveRoute::Leg::kLocal;
    } else if (const std::optional<Path> p = path_to(from, dst)) {
      kind = MoveRoute::Leg::kNetwork;
      path = *p;
    } else {
      kind = MoveRoute::Leg::kUnreachable;
    }
  };
  leg(src, route.data, route.data_path);
  if (plan.predictor.count > 0) {
    if (predictor_src == src && src != dst) {
      route.predictor = MoveRoute::Leg::kWithData;  // two flows on one path share it
    } else {
      leg(predictor_src, route.predictor, route.predictor_path);
    }
  }
  return route;
}

std::int64_t leg_ns(MoveRoute::Leg leg, const Path& path, BitsPerSecond host_link, Bytes bytes) {
  if (bytes.count <= 0) return 0;
  switch (leg) {
    case MoveRoute::Leg::kNone:
      return 0;
    case MoveRoute::Leg::kLocal:
      return round_to_ns(bytes.bits() / host_link.value);
    case MoveRoute::Leg::kNetwork:
      return round_to_ns(path.latency.value) + round_to_ns(bytes.bits() / path.bandwidth.value);
    case MoveRoute::Leg::kUnreachable:
    case MoveRoute::Leg::kWithData:
      return 0;
  }
  return 0;
}

namespace {

// A hybrid's front ids go ahead of its KV only over the network; on the same node they are
// in host memory already.
bool ids_ahead(const MovePlan& plan, const MoveRoute& route) {
  return plan.front_tokens > 0 && plan.tokens.count > 0 && route.data == MoveRoute::Leg::kNetwork;
}

// When the front's token ids are at the receiver (0: they need not travel first).
std::int64_t ids_arrival_ns(const MovePlan& plan, const MoveRoute& route) {
  return ids_ahead(plan, route) ? leg_ns(route.data, route.data_path, route.host_link, plan.tokens)
                                : 0;
}

}  // namespace

MoveEstimate estimate_move(const MovePlan& plan, const MoveMethods& methods, const MoveRoute& route,
                           std::int64_t gpu_backlog_ns, const ComputeCosts& compute) {
  MoveEstimate e;
  const bool with_data = route.predictor == MoveRoute::Leg::kWithData;
  const Bytes sent = plan.kv + plan.tokens + (with_data ? plan.predictor : Bytes{});
  if ((sent.count > 0 && route.data == MoveRoute::Leg::kUnreachable) ||
      (plan.predictor.count > 0 && route.predictor == MoveRoute::Leg::kUnreachable) ||
      (with_data && plan.predictor.count > 0 && route.data == MoveRoute::Leg::kNone)) {
    e.reachable = false;
  }
  // Leading ids are their own flow: the KV's flow starts once they are on the wire.
  const bool lead = ids_ahead(plan, route);
  if (lead) {
    e.ids_ns = ids_arrival_ns(plan, route);
    e.ids_lead_ns = round_to_ns(plan.tokens.bits() / route.data_path.bandwidth.value);
  }
  const Bytes data = sent - (lead ? plan.tokens : Bytes{});
  const std::int64_t local_wait =
      route.data == MoveRoute::Leg::kLocal ? route.host_link_backlog_ns : 0;
  const std::int64_t data_ns =
      data.count > 0
          ? leg_ns(route.data, route.data_path, route.host_link, data) +
                std::max(engine_ns(methods.engine, plan.descriptors), e.ids_lead_ns) + local_wait
          : 0;
  e.transfer_ns =
      std::max({data_ns, e.ids_ns,
                leg_ns(route.predictor, route.predictor_path, route.host_link, plan.predictor),
                plan.strategy == Strategy::kRiskKv ? route.predictor_ready_in_ns : std::int64_t{0},
                plan.cached_load_ns});
  if (!plan.needs_gpu()) return e;  // a pure transfer does not wait for the GPU
  if (plan.front_tokens > 0) {
    // The front is queued once the cached prefix is in HBM and its ids are in, and runs
    // while the rest of the KV arrives.
    const std::int64_t front_ns =
        round_to_ns(compute.extend(*methods.model, plan.cached_tokens, plan.front_tokens).value);
    e.queue_ns = std::max<std::int64_t>({0, gpu_backlog_ns, plan.cached_load_ns, e.ids_ns});
    e.compute_ns = front_ns;
    e.overlap_ns = std::min(e.transfer_ns, e.queue_ns + front_ns);
  } else {
    // GPU work is queued when the bytes are in; the queue drains meanwhile.
    e.queue_ns = std::max<std::int64_t>(0, gpu_backlog_ns - e.transfer_ns);
  }
  if (plan.reconstruct_tokens > 0) {
    e.compute_ns +=
        round_to_ns(compute
                        .reconstruct(*methods.model, *methods.omission, plan.reconstruct_tokens, 1,
                                     methods.predictor_dtype)
                        .value);
  }
  if (plan.replay_tokens > 0) {
    e.compute_ns +=
        round_to_ns(compute.extend(*methods.model, plan.replay_prefix(), plan.replay_tokens).value);
  }
  return e;
}

MovePlan balance_hybrid(MovePlan plan, const MoveMethods& methods, const MoveRoute& route,
                        std::int64_t gpu_backlog_ns, const ComputeCosts& compute) {
  if (plan.strategy != Strategy::kHybrid || !plan.feasible()) return plan;
  const std::int64_t held = plan.front_tokens + plan.kv_tokens;
  const std::int64_t block = std::max<std::int64_t>(methods.engine.block_tokens, 1);
  const std::int64_t blocks = (held + block - 1) / block;
  const int layers = methods.model->layers;
  auto split = [&](std::int64_t k) {  // the first k blocks recomputed, the rest shipped
    MovePlan p = plan;
    p.front_tokens = std::min(k * block, held);
    p.kv_tokens = held - p.front_tokens;
    p.kv = kv_bytes(*methods.model, p.kv_tokens);
    p.descriptors = kv_descriptors(methods.engine, p.kv_tokens, layers);
    if (p.kv_tokens == 0) {  // nothing shipped: one prefill over the tail too, not two passes
      p.front_tokens += p.replay_tokens;
      p.replay_tokens = 0;
    }
    p.tokens = token_id_bytes(p.recomputed_tokens());
    return p;
  };
  auto estimate = [&](const MovePlan& p) {
    return estimate_move(p, methods, route, gpu_backlog_ns, compute);
  };
  // The front's end rises and the transfer's end falls with k: bisect for the first k
  // where the front ends no earlier than the transfer.
  std::int64_t lo = 0, hi = blocks;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    const MovePlan p = split(mid);
    const std::int64_t front_end =
        std::max<std::int64_t>({gpu_backlog_ns, 0, p.cached_load_ns, ids_arrival_ns(p, route)}) +
        (p.front_tokens > 0
             ? round_to_ns(compute.extend(*methods.model, p.cached_tokens, p.front_tokens).value)
             : 0);
    if (front_end >= estimate(p).transfer_ns) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  MovePlan best = split(0);
  std::int64_t best_ns = estimate(best).total_ns();
  // Between the ends the cost is max(rising, falling) + a fixed tail: least at the crossing.
  // Recomputing everything is one pass over the tail too, so it is its own candidate.
  for (std::int64_t k : {lo - 1, lo, blocks}) {
    if (k <= 0 || k > blocks) continue;
    MovePlan p = split(k);
    const std::int64_t ns = estimate(p).total_ns();
    if (ns < best_ns) best = std::move(p), best_ns = ns;
  }
  return best;
}

std::optional<std::size_t> pick_fastest(const std::vector<MoveCandidate>& candidates,
                                        std::optional<double> quality_budget) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const MoveCandidate& c = candidates[i];
    if (!c.plan.feasible() || !c.estimate.reachable) continue;
    if (quality_budget && c.plan.delta_nll > *quality_budget) continue;
    if (!best || c.estimate.total_ns() < candidates[*best].estimate.total_ns()) best = i;
  }
  return best;
}

}  // namespace kvshift::cost_model
