// ServingModel: migrations and recoveries, before and after the move engine.
// A move is planned and priced by the cost model's plan_move / estimate_move
// (the one place a strategy's arithmetic lives), chosen among candidate
// destinations by the run's MovePolicy and booked here; the MoveEngine runs it
// (transfers, rebuild, one outcome); after_move() says what its end means for
// the request.
#include <algorithm>
#include <cmath>

#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

using namespace serving_detail;
using cost_model::MoveCandidate;
using cost_model::MovePlan;
using cost_model::MoveRoute;
using cost_model::SourceKv;

// ------------------------------------------------------------ planning

MoveRoute ServingModel::route_of(const MovePlan& plan, int src, int dst_node) {
  // The bandwidth a new flow would get now, not the path's idle capacity.
  const cost_model::PathFinder path_to = [this](int from,
                                                int to) -> std::optional<cost_model::Path> {
    const auto p = fabric_.path(node_id(from), node_id(to));
    if (!p) return std::nullopt;
    return cost_model::Path{fabric_.available_bandwidth(node_id(from), node_id(to)), p->latency};
  };
  MoveRoute route =
      cost_model::make_route(plan, src, predictor_source_, dst_node, spec_.gpu.host_link, path_to);
  const PredictorCache& predictors = *served_at(dst_node).predictors;
  if (plan.strategy == Strategy::kRiskKv &&
      predictors.state(dst_node) == PredictorCache::State::kFetching) {
    route.predictor_ready_in_ns =
        std::max<std::int64_t>(0, predictors.eta_ns(dst_node) - sim_.now().ns);
  }
  return route;
}

MoveCandidate ServingModel::candidate(Strategy s, const Request& r,
                                      const cost_model::MoveState& state, int src, int gpu) {
  const Deployment& d = deployment(r);
  cost_model::MoveState here = state;
  here.predictor_at_dst = d.predictors->at_or_coming(node_of(gpu));
  const PrefixRun cached = tiers_->cached_at(r.prefix, r.rec.prompt_tokens, gpu);
  here.dst_cached =
      static_cast<std::int64_t>(cached.blocks()) * spec_.serving.prefix_cache.block_tokens;
  here.dst_cached_load_ns = cached.load.ns;
  MovePlan plan = cost_model::plan_move(s, d.methods, here);
  MoveRoute route = route_of(plan, src, node_of(gpu));
  route.host_link_backlog_ns = links_.backlog_to_gpu(gpu).ns;
  const std::int64_t backlog = gpus_[gpu].worker->backlog().ns;
  const cost_model::ComputeCosts& compute = gpus_[gpu].costs->compute();
  plan = cost_model::balance_hybrid(std::move(plan), d.methods, route, backlog, compute);
  const cost_model::MoveEstimate e =
      cost_model::estimate_move(plan, d.methods, route, backlog, compute);
  return {std::move(plan), e, gpu};
}

MoveChoice ServingModel::choose_move(const Request& r, bool from_replica, int src,
                                     const std::vector<int>& destinations) {
  MoveAsk ask;
  // A migration reads the live KV; a recovery what the replica keeps.
  const SourceKv source = src < 0         ? SourceKv::kNone
                          : !from_replica ? SourceKv::kFull
                                          : deployment(r).replica_kv;
  ask.state = {r.context, from_replica ? r.replicated : r.context, source, r.scored, false};
  ask.src = src;
  if (src >= 0) ask.src_name = spec_.cluster.nodes[static_cast<std::size_t>(src)].name;
  ask.destinations = destinations;
  ask.quality_budget = spec_.policies.quality_budget;
  const MovePricer price = [this, &r](Strategy s, const cost_model::MoveState& state, int from,
                                      int gpu) { return candidate(s, r, state, from, gpu); };
  if (std::optional<MoveChoice> c = policy_->choose(ask, price)) return std::move(*c);
  return replay_from_router(ask, price);
}

// ------------------------------------------------------------ execution

void ServingModel::start_move(Request& r, MoveTrigger trigger, int from_node,
                              std::int64_t stall_since) {
  if (r.phase == Phase::kDone || move_engine_->moving(r.rec.id)) return;
  const bool from_replica = trigger == MoveTrigger::kFailure;
  const bool handoff = trigger == MoveTrigger::kHandoff;
  // A fixed strategy takes the router's first destination its source can reach; adaptive
  // weighs them all. A node whose transfer slots are all taken is not a destination now.
  RequestRouter::Accept accept;
  if (spec_.transfer_engine.max_inflight_per_destination > 0) {
    accept = [this](int node) { return move_engine_->slot_free(node); };
  }
  // A recovery may land on its own node (a failed GPU is closed; a repaired node is empty).
  const int exclude = from_replica ? -1 : from_node;
  const std::vector<int> dests = router_.destinations(r.reserved, exclude, kMoveDestinations,
                                                      deployment(r).decode_pools, accept);
  if (dests.empty()) {
    if (from_replica) {
      pending_recoveries_.push_back({r.rec.id, from_node, stall_since, sim_.now().ns});
    } else if (handoff) {
      pending_handoffs_.emplace_back(r.rec.id, r.epoch);
    }
    return;  // a migration with nowhere to go simply does not happen
  }
  int src = from_node;
  int src_gpu = -1;
  if (from_replica) {
    src = r.replica >= 0 && node_up_[r.replica] ? r.replica : -1;
  } else if (handoff) {
    src_gpu = r.gpu;  // the prefill GPU, reserved until the handoff ends; -1 after a failed one
    if (src_gpu < 0) src = -1;
  } else {
    src_gpu = r.gpu;
    std::optional<DecodeState> st = gpus_[src_gpu].worker->remove_decoding(r.rec.id);
    if (!st) return;  // not decoding (still in prefill): it moves after its prefill
    r.unstreamed += st->context - r.context;
    r.context = st->context;
    r.remaining = st->remaining;
  }
  MoveChoice c = choose_move(r, from_replica, src, dests);
  if (handoff && src < 0) {
    c.fallback = "decode-side prefill from the token ids: the handoff from the prefill GPU failed";
  }
  MoveOrder o = book_destination(r, c);
  r.phase = Phase::kMoving;
  o.plan = std::move(c.option.plan);
  o.src = c.src;
  o.src_gpu = src_gpu;
  o.from_node = from_node;
  o.stall_since = stall_since;
  o.ids_lead_ns = c.option.estimate.ids_lead_ns;
  o.rec = move_record(r, o, c, trigger);
  move_engine_->start(std::move(o));
}

MoveOrder ServingModel::book_destination(Request& r, const MoveChoice& c) {
  MoveOrder o;
  o.request = r.rec.id;
  o.deployment = r.rec.deployment;
  o.dst_gpu = c.option.destination;
  // The prefix the destination caches is pinned there for the request before its room is
  // booked (booking may evict unpinned blocks); the request books the rest.
  const std::size_t cached_blocks =
      static_cast<std::size_t>(c.option.plan.cached_tokens /
                               std::max<std::int64_t>(spec_.serving.prefix_cache.block_tokens, 1));
  if (cached_blocks == 0) {
    reserve(c.option.destination, r, r.reserved);
    return o;
  }
  const PrefixTiers::MoveLoad load =
      tiers_->load_for_move(r.prefix, r.rec.prompt_tokens, c.option.destination, cached_blocks);
  o.cached_load = load.load;
  o.fetch_blocks = load.fetch_blocks;
  o.dst_pins = load.pins;
  reserve(c.option.destination, r,
          r.reserved -
              static_cast<std::int64_t>(cached_blocks) * tiers_->block_bytes(c.option.destination));
  return o;
}

MoveRecord ServingModel::move_record(const Request& r, const MoveOrder& o, const MoveChoice& c,
                                     MoveTrigger trigger) const {
  MoveRecord rec;
  rec.request = r.rec.id;
  rec.deployment = r.rec.deployment;
  rec.trigger = trigger;
  rec.from = o.from_node >= 0 ? spec_.cluster.nodes[o.from_node].name : "";
  rec.to = spec_.cluster.nodes[gpus_[o.dst_gpu].node].name;
  rec.requested = strategy_name(strategy_);
  rec.strategy = strategy_name(o.plan.strategy);
  rec.fallback = c.fallback;
  rec.context_tokens = r.context;
  const bool replay = o.plan.strategy == Strategy::kTokenReplay;
  rec.available_tokens = replay ? r.context : o.plan.kv_tokens;
  rec.front_tokens = o.plan.front_tokens;
  rec.tail_tokens = o.plan.replay_tokens;
  rec.cached_tokens = o.plan.cached_tokens;
  rec.source = c.src >= 0 ? spec_.cluster.nodes[c.src].name : "";
  rec.start_ns = sim_.now().ns;
  rec.estimated_ns = c.option.estimate.total_ns();
  rec.delta_nll = o.plan.delta_nll;
  return rec;
}

void ServingModel::admit_soon() {
  if (admit_scheduled_) return;
  admit_scheduled_ = true;
  sim_.schedule_after(SimTime{}, [this] {
    admit_scheduled_ = false;
    admit_pending();
  });
}

// ------------------------------------------------------------ endings

void ServingModel::after_move(const MoveEnding& e) {
  Request& r = requests_.at(e.request);
  const MoveOutcome outcome = e.outcome;
  const std::string& why = e.why;
  const int src_gpu = e.src_gpu, dst_gpu = e.dst_gpu, from_node = e.from_node;
  const MoveTrigger trigger = e.trigger;
  const std::int64_t stall = e.stall_since;
  const PrefixPins pins = e.dst_pins;
  Gpu& dst = gpus_[dst_gpu];
  if (outcome == MoveOutcome::kDone) {
    land(r, dst_gpu, src_gpu, pins);
    return;
  }
  tiers_->give_back(r.prefix, dst_gpu, pins);
  if (dst.worker->up() && router_.holds(dst_gpu, r.rec.id)) unreserve(dst_gpu, r);
  if (trigger == MoveTrigger::kHandoff) {
    after_handoff(r, e);
    return;
  }
  if (src_gpu >= 0 && gpus_[src_gpu].worker->up()) {
    // A migration that did not happen: the source still holds the KV; carry on there.
    r.phase = Phase::kDecoding;
    gpus_[src_gpu].worker->add_decoding({r.rec.id, r.context, r.remaining});
    if (outcome == MoveOutcome::kCancelled && node_draining_[gpus_[src_gpu].node]) {
      const int node = gpus_[src_gpu].node;
      sim_.schedule_after(SimTime{}, [this, id = r.rec.id, node, stall, epoch = r.epoch] {
        Request* q = requests_.find(id);
        if (q && q->epoch == epoch && q->phase == Phase::kDecoding)
          start_move(*q, MoveTrigger::kDrain, node, stall);
      });
    }
    return;
  }
  if (outcome == MoveOutcome::kCancelled) {  // a recovery re-planned elsewhere
    r.phase = Phase::kMoving;
    sim_.schedule_after(SimTime{},
                        [this, id = r.rec.id, trigger, from_node, stall, epoch = r.epoch] {
                          Request* q = requests_.find(id);
                          if (q && q->epoch == epoch && q->phase == Phase::kMoving)
                            start_move(*q, trigger, from_node, stall);
                        });
    return;
  }
  r.gpu = -1;
  ++r.epoch;
  if (++r.attempts >= kMaxMoveAttempts) {
    fail_request(r, "gave up after " + std::to_string(kMaxMoveAttempts) + " failed moves: " + why);
    return;
  }
  // The KV that was on its way is gone; recover from the replica (or by replay).
  r.phase = Phase::kMoving;
  sim_.schedule_after(SimTime{}, [this, id = r.rec.id, stall, epoch = r.epoch] {
    Request* q = requests_.find(id);
    if (q && q->epoch == epoch && q->phase == Phase::kMoving)
      start_move(*q, MoveTrigger::kFailure, -1, stall);
  });
}

void ServingModel::after_handoff(Request& r, const MoveEnding& e) {
  const int src_gpu = e.src_gpu;
  const std::string& why = e.why;
  const Gpu& dst = gpus_[e.dst_gpu];
  const bool prefill_up = src_gpu >= 0 && gpus_[src_gpu].worker->up();
  // The destination went away (drain or failure) while the prefill GPU still holds the KV:
  // hand off elsewhere. Otherwise the transfer itself failed (path, stall, source).
  if (prefill_up && (e.outcome == MoveOutcome::kCancelled || !dst.worker->up())) {
    r.phase = Phase::kHandingOff;
  } else {
    // The KV did not arrive: fall back to a decode-side prefill from the token ids.
    if (prefill_up) unreserve(src_gpu, r);
    r.gpu = -1;
    ++r.epoch;
    if (++r.attempts >= kMaxMoveAttempts) {
      fail_request(
          r, "gave up after " + std::to_string(kMaxMoveAttempts) + " failed handoffs: " + why);
      return;
    }
    r.phase = Phase::kHandingOff;
  }
  sim_.schedule_after(SimTime{}, [this, id = r.rec.id, epoch = r.epoch] {
    Request* q = requests_.find(id);
    if (q && q->epoch == epoch && q->phase == Phase::kHandingOff) try_handoff(*q);
  });
}

void ServingModel::land(Request& r, int dst_gpu, int src_gpu, PrefixPins pins) {
  if (src_gpu >= 0 && router_.holds(src_gpu, r.rec.id)) unreserve(src_gpu, r);
  tiers_->take_pins(r.prefix, dst_gpu, pins);  // the destination's cached prefix is its own
  const int dst_node = gpus_[dst_gpu].node;
  r.gpu = dst_gpu;
  r.phase = Phase::kDecoding;
  r.attempts = 0;
  r.rec.moves += 1;
  r.rec.final_node = spec_.cluster.nodes[dst_node].name;
  if (r.rec.first_token_ns < 0) r.rec.first_token_ns = sim_.now().ns;  // a handoff landed
  rehome_replica(r, dst_node);
  gpus_[dst_gpu].worker->add_decoding({r.rec.id, r.context, r.remaining});
  admit_pending();
}

void ServingModel::rehome_replica(Request& r, int node) {
  // A replica lives on another node, or (local placement) on the request's own: after a
  // move it may have to be placed again.
  const bool local = spec_.protection.placement == ReplicaPlacement::kLocal;
  if (r.replica >= 0 && (r.replica == node) != local) drop_replica(r);
  // A handoff is protected from its decode GPU on; a request that had none (its replica was
  // lost, or had no room) is placed again.
  if (r.replica < 0 && spec_.protection.mode != ProtectionMode::kNone) protect(r, node);
  if (r.replica >= 0 && r.replicated < r.context) r.unstreamed = r.context - r.replicated;
}

void ServingModel::fail_request(Request& r, const std::string& reason) {
  release_gpu(r);
  r.phase = Phase::kDone;
  r.rec.outcome = RequestOutcome::kFailed;
  r.rec.reason = reason;
  r.rec.finish_ns = sim_.now().ns;
  drop_replica(r);
  admit_pending();
}

void ServingModel::close_moves() {
  // Moves still running at the end: their latency so far is a lower bound.
  move_engine_->close([this](std::uint64_t id, const std::string& what) {
    requests_.at(id).rec.reason = "moving: " + what;
  });
  for (const PendingRecovery& p : pending_recoveries_) {
    Request* found = requests_.find(p.request);
    if (!found || found->phase == Phase::kDone) continue;
    Request& r = *found;
    MoveRecord rec;
    rec.request = p.request;
    rec.trigger = MoveTrigger::kFailure;
    rec.from = p.from_node >= 0 ? spec_.cluster.nodes[p.from_node].name : "";
    rec.requested = strategy_name(strategy_);
    rec.context_tokens = r.context;
    rec.start_ns = p.since;
    rec.end_ns = end_ns_;
    rec.stall_ns = end_ns_ - p.stall_since;
    if (can_be_served(r)) {
      rec.outcome = MoveOutcome::kUnfinished;
      rec.note = "no GPU with room to recover on";
      r.rec.reason = "waiting to recover: no GPU with room";
    } else {  // finish() counts the request as failed
      rec.outcome = MoveOutcome::kFailed;
      rec.note = "no GPU up to recover on";
      r.rec.reason = "waiting to recover: no GPU up";
    }
    books_.add(rec);
  }
}

}  // namespace kvshift::sim
