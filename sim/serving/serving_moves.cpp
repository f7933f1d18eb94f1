// ServingModel: migrations and recoveries. Each move is planned and priced by
// the cost model's plan_move / estimate_move (the one place a strategy's
// arithmetic lives), chosen among candidate destinations, then executed as an
// activity: transferring (its own flows, plus a shared predictor fetch; a
// hybrid's front prefill runs meanwhile) -> rebuilding (its GPU jobs) -> one
// outcome, reached once in end_move().
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

SourceKv ServingModel::source_kv(const Request& r, bool from_replica, int src) const {
  if (src < 0) return SourceKv::kNone;
  if (!from_replica) return SourceKv::kFull;  // a migration reads the live KV
  const DeploymentSpec& d = deployment(r).spec;
  switch (spec_.protection.mode) {
    case ProtectionMode::kNone:
      return SourceKv::kNone;
    case ProtectionMode::kFull:
      return SourceKv::kFull;
    case ProtectionMode::kRiskKv:
      return d.risk_kv ? SourceKv::kKeptLayers : SourceKv::kFull;
    case ProtectionMode::kProxyKv:
      return d.proxy_kv ? SourceKv::kKeptTokens : SourceKv::kFull;
  }
  return SourceKv::kNone;
}

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
  const PrefixRun cached = cached_at(r, gpu);
  here.dst_cached =
      static_cast<std::int64_t>(cached.blocks()) * spec_.serving.prefix_cache.block_tokens;
  here.dst_cached_load_ns = cached.load.ns;
  MovePlan plan = cost_model::plan_move(s, d.methods, here);
  MoveRoute route = route_of(plan, src, node_of(gpu));
  route.host_link_backlog_ns = gpus_[gpu].to_gpu.backlog(sim_.now()).ns;
  const std::int64_t backlog = gpus_[gpu].worker->backlog().ns;
  const cost_model::ComputeCosts& compute = costs_of(node_of(gpu)).compute();
  plan = cost_model::balance_hybrid(std::move(plan), d.methods, route, backlog, compute);
  const cost_model::MoveEstimate e =
      cost_model::estimate_move(plan, d.methods, route, backlog, compute);
  return {std::move(plan), e, gpu};
}

MoveChoice ServingModel::choose_move(const Request& r, bool from_replica, int src,
                                     const std::vector<int>& destinations) {
  MoveAsk ask;
  ask.state = {r.context, from_replica ? r.replicated : r.context, source_kv(r, from_replica, src),
               r.scored, false};
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
  if (r.phase == Phase::kDone || moves_.count(r.rec.id)) return;
  const bool from_replica = trigger == MoveTrigger::kFailure;
  const bool handoff = trigger == MoveTrigger::kHandoff;
  // A fixed strategy takes the router's first destination its source can reach; adaptive
  // weighs them all. A node whose transfer slots are all taken is not a destination now.
  RequestRouter::Accept accept;
  if (spec_.transfer_engine.max_inflight_per_destination > 0) {
    accept = [this](int node) { return slot_free(node); };
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
  Gpu& dst = gpus_[c.option.destination];
  // The prefix the destination caches is pinned there for the request before its room is
  // booked (booking may evict unpinned blocks); the request books the rest.
  const std::size_t cached_blocks =
      static_cast<std::size_t>(c.option.plan.cached_tokens /
                               std::max<std::int64_t>(spec_.serving.prefix_cache.block_tokens, 1));
  Pins pins;
  SimTime load;
  std::size_t fetch = 0;
  if (cached_blocks > 0) {
    // From the destination node's host and SSD tiers over its host link, then (the run's last
    // blocks) from the storage tier over the network.
    const PrefixRun run = prefix_run(r, c.option.destination);
    const std::size_t local = std::min(cached_blocks, run.local());
    load = read_tiers(r, c.option.destination, run, local, true);
    fetch = cached_blocks - local;
    if (fetch > 0) {
      storage_tier_->touch(std::span<const std::uint64_t>(r.prefix_keys).subspan(local, fetch));
      PrefixCacheStats::Tier& t = result_.prefix_cache.storage;
      ++t.move_loads;
      t.move_tokens += static_cast<std::int64_t>(fetch) * spec_.serving.prefix_cache.block_tokens;
      t.read_bytes += static_cast<std::int64_t>(fetch) * storage_tier_->block_bytes();
    }
    pin_blocks(c.option.destination,
               std::span<const std::uint64_t>(r.prefix_keys).first(cached_blocks));
    pins = {cached_blocks, dst.cache->generation()};
    reserve(c.option.destination, r,
            r.reserved - static_cast<std::int64_t>(cached_blocks) * dst.cache->block_bytes());
  } else {
    reserve(c.option.destination, r);
  }
  r.phase = Phase::kMoving;

  auto m = std::make_unique<Move>();
  m->id = ++move_seq_;
  m->r = &r;
  m->plan = std::move(c.option.plan);
  m->src = c.src;
  m->src_gpu = src_gpu;
  m->dst_gpu = c.option.destination;
  m->from_node = from_node;
  m->stall_since = stall_since;
  m->dst_pins = pins;
  m->cached_load = load;
  m->fetch_blocks = fetch;
  m->ids_lead_ns = c.option.estimate.ids_lead_ns;
  MoveRecord& rec = m->rec;
  rec.request = r.rec.id;
  rec.deployment = r.rec.deployment;
  rec.trigger = trigger;
  rec.from = from_node >= 0 ? spec_.cluster.nodes[from_node].name : "";
  rec.to = spec_.cluster.nodes[dst.node].name;
  rec.requested = strategy_name(strategy_);
  rec.strategy = strategy_name(m->plan.strategy);
  rec.fallback = c.fallback;
  rec.context_tokens = r.context;
  const bool replay = m->plan.strategy == Strategy::kTokenReplay;
  rec.available_tokens = replay ? r.context : m->plan.kv_tokens;
  rec.front_tokens = m->plan.front_tokens;
  rec.tail_tokens = m->plan.replay_tokens;
  rec.cached_tokens = m->plan.cached_tokens;
  rec.source = c.src >= 0 ? spec_.cluster.nodes[c.src].name : "";
  rec.start_ns = sim_.now().ns;
  rec.estimated_ns = c.option.estimate.total_ns();
  rec.delta_nll = m->plan.delta_nll;
  if (spec_.transfer_engine.max_inflight_per_destination > 0) {
    m->in_slot = true;
    if (++inflight_[dst.node] > spec_.transfer_engine.max_inflight_per_destination) {
      throw std::logic_error("invariant: node " + rec.to + " over its transfer-slot cap");
    }
  }
  const std::uint64_t request = r.rec.id;
  moves_[request] = std::move(m);
  launch(request);
}

bool ServingModel::slot_free(int node) const {
  const int cap = spec_.transfer_engine.max_inflight_per_destination;
  return cap <= 0 || inflight_[static_cast<std::size_t>(node)] < cap;
}

void ServingModel::release_slot(Move& m) {
  if (!m.in_slot) return;
  m.in_slot = false;
  --inflight_[static_cast<std::size_t>(node_of(m.dst_gpu))];
  admit_soon();  // waiting handoffs and recoveries may take the slot
}

void ServingModel::admit_soon() {
  if (admit_scheduled_) return;
  admit_scheduled_ = true;
  sim_.schedule_after(SimTime{}, [this] {
    admit_scheduled_ = false;
    admit_pending();
  });
}

ServingModel::Move* ServingModel::find_move(std::uint64_t request, std::uint64_t id) {
  auto it = moves_.find(request);
  return it != moves_.end() && it->second->id == id ? it->second.get() : nullptr;
}

void ServingModel::launch(std::uint64_t request) {
  Move& m = *moves_.at(request);
  const std::uint64_t id = m.id;
  const int dst = node_of(m.dst_gpu);
  if (m.plan.strategy == Strategy::kRiskKv) {
    PredictorCache& predictors = *deployment(*m.r).predictors;
    if (predictors.state(dst) != PredictorCache::State::kResident) {
      m.awaiting_predictor = true;
      if (predictors.state(dst) == PredictorCache::State::kAbsent) begin_predictor_fetch(dst);
      predictors.wait(dst, request);
    }
  }
  // The cached prefix loads from the destination node's host or SSD tier, and from the storage
  // tier, beside the transfers.
  if (m.cached_load.ns > 0) {
    ++m.transfers_left;
    ++m.prefix_loads;
    sim_.schedule_after(m.cached_load, [this, request, id] { prefix_loaded(request, id); });
  }
  if (m.fetch_blocks > 0) {
    ++m.transfers_left;
    ++m.prefix_loads;
    fetch_prefix(m);
  }
  // Over the network a hybrid's front ids travel first, as a flow of their own; on the same
  // node they are in host memory.
  const bool ids_ahead =
      m.plan.front_tokens > 0 && m.plan.tokens.count > 0 && m.src >= 0 && m.src != dst;
  if (m.plan.front_tokens > 0) {
    // Hybrid: the receiver prefills the front once the cached prefix and the ids are in,
    // while the rest of the KV is on its way.
    m.front_running = true;
    auto front_done = [this, request, id](SimTime start, SimTime end) {
      Move* mv = find_move(request, id);
      if (!mv) return;
      mv->rec.compute_ns += (end - start).ns;
      mv->rec.queue_ns += start.ns - mv->rec.start_ns;
      mv->front_running = false;
      if (mv->bytes_in) rebuild(*mv);
    };
    m.front = GpuJob{JobKind::kReplay, request, m.plan.front_tokens, std::move(front_done),
                     m.plan.cached_tokens};
    m.ids_pending = ids_ahead;
    submit_front_if_ready(m);
  }
  if (m.src >= 0) {
    const Bytes ids = ids_ahead ? m.plan.tokens : Bytes{};
    const Bytes kv = m.plan.kv, tokens = m.plan.tokens - ids;
    // The transfer engine builds and posts the KV's descriptors before any byte flows.
    const std::int64_t setup =
        kv.count > 0 ? cost_model::engine_ns(engine_, m.plan.descriptors) : 0;
    const SimTime delay{std::max(setup, m.ids_lead_ns)};
    const int src = m.src;
    if (ids.count > 0) send_part(m, src, dst, {}, ids, {});
    Move* alive = find_move(request, id);  // a send may fail at once
    if (alive && kv.count + tokens.count > 0) send_part(*alive, src, dst, kv, tokens, delay);
  }
  Move* still = find_move(request, id);
  if (still && still->transfers_left == 0 && !still->awaiting_predictor) on_transfers_done(*still);
}

void ServingModel::submit_front_if_ready(Move& m) {
  if (!m.front || m.prefix_loads > 0 || m.ids_pending) return;
  gpus_[m.dst_gpu].worker->submit(std::move(*m.front));
  m.front.reset();
}

void ServingModel::prefix_loaded(std::uint64_t request, std::uint64_t id) {
  Move* m = find_move(request, id);
  if (!m) return;
  --m->prefix_loads;
  submit_front_if_ready(*m);
  if (--m->transfers_left == 0 && !m->awaiting_predictor) on_transfers_done(*m);
}

void ServingModel::fetch_prefix(Move& m) {
  const std::uint64_t request = m.r->rec.id, id = m.id;
  const int store = storage_tier_node_, dst = node_of(m.dst_gpu);
  const std::int64_t bytes =
      static_cast<std::int64_t>(m.fetch_blocks) * storage_tier_->block_bytes();
  Fabric::Done done = [this, request, id, bytes](bool delivered, const std::string& reason) {
    Move* mv = find_move(request, id);
    if (!mv) return;
    if (!delivered) {
      end_move(*mv, MoveOutcome::kFailed,
               "the prefix fetch from the storage tier failed: " + reason);
      return;
    }
    sim_.schedule_at(host_copy(mv->dst_gpu, true, bytes),
                     [this, request, id] { prefix_loaded(request, id); });
  };
  send_flow(m, store, dst, bytes, done);
}

void ServingModel::send_part(Move& m, int src, int dst, Bytes kv, Bytes tokens, SimTime delay) {
  const std::uint64_t request = m.r->rec.id, id = m.id;
  const std::int64_t bytes = kv.count + tokens.count;
  auto done = [this, request, id, kv, tokens](bool delivered, const std::string& reason) {
    Move* mv = find_move(request, id);
    if (!mv) return;
    if (!delivered) {
      end_move(*mv, MoveOutcome::kFailed, "transfer failed: " + reason);
      return;
    }
    result_.bytes.kv += kv.count;
    result_.bytes.tokens += tokens.count;
    mv->rec.kv_bytes += kv.count;
    mv->rec.token_bytes += tokens.count;
    if (kv.count == 0 && mv->ids_pending) {  // a hybrid's leading ids
      mv->ids_pending = false;
      submit_front_if_ready(*mv);
    }
    if (--mv->transfers_left == 0 && !mv->awaiting_predictor) on_transfers_done(*mv);
  };
  ++m.transfers_left;
  if (delay.ns > 0) {
    sim_.schedule_after(delay, [this, request, id, src, dst, bytes, done] {
      start_flow(request, id, src, dst, bytes, done);
    });
    return;
  }
  start_flow(request, id, src, dst, bytes, done);
}

void ServingModel::start_flow(std::uint64_t request, std::uint64_t id, int src, int dst,
                              std::int64_t bytes, const Fabric::Done& done) {
  Move* m = find_move(request, id);
  if (!m) return;
  const auto fault = path_faults_.find({src, dst});
  if (fault != path_faults_.end() && fault->second == EventKind::kPathFailure) {
    done(false, "the path " + spec_.cluster.nodes[src].name + " -> " +
                    spec_.cluster.nodes[dst].name + " is failed");
    return;
  }
  if (fault != path_faults_.end()) {  // a stall: the transfer hangs
    hang(request, id, src, dst, bytes, done);
    return;
  }
  if (src == dst) {  // same node: the bytes cross the host link, not the network
    sim_.schedule_at(host_copy(m->dst_gpu, true, bytes), [done] { done(true, ""); });
    return;
  }
  send_flow(*m, src, dst, bytes, done);
}

void ServingModel::send_flow(Move& m, int src, int dst, std::int64_t bytes,
                             const Fabric::Done& done) {
  // A delivered flow leaves the move's list at once: a later stall on its path must not
  // post it again, nor cancel a newer flow by a handle the fabric has reused.
  const std::uint64_t request = m.r->rec.id, id = m.id, seq = ++m.flow_seq;
  Fabric::Done arrived = [this, request, id, seq, done](bool delivered, const std::string& why) {
    if (Move* mv = find_move(request, id)) {
      std::erase_if(mv->flows, [seq](const Move::Flow& f) { return f.seq == seq; });
    }
    done(delivered, why);
  };
  const std::uint64_t handle =
      fabric_.send(node_id(src), node_id(dst), Bytes{bytes}, std::move(arrived));
  m.flows.push_back({seq, handle, src, dst, bytes, done});
}

void ServingModel::hang(std::uint64_t request, std::uint64_t id, int src, int dst,
                        std::int64_t bytes, const Fabric::Done& done) {
  if (const std::optional<Seconds> timeout = spec_.transfer_engine.stall_timeout) {
    sim_.schedule_after(from_seconds(*timeout), [this, request, id, src, dst, t = *timeout] {
      if (Move* mv = find_move(request, id)) {
        end_move(*mv, MoveOutcome::kFailed,
                 "transfer stalled on " + spec_.cluster.nodes[src].name + " -> " +
                     spec_.cluster.nodes[dst].name + ": timed out after " + format_ms(t));
      }
    });
    return;
  }
  // No timeout: it hangs until the stall clears, then starts again.
  stalled_[{src, dst}].push_back([this, request, id, src, dst, bytes, done] {
    start_flow(request, id, src, dst, bytes, done);
  });
}

void ServingModel::begin_predictor_fetch(int node) {
  PredictorCache& predictors = *served_at(node).predictors;
  MovePlan shipped;
  shipped.strategy = Strategy::kRiskKv;
  shipped.predictor = Bytes{served_at(node).predictor_bytes};
  const MoveRoute route = route_of(shipped, -1, node);
  predictors.begin_fetch(node,
                         sim_.now().ns + cost_model::leg_ns(route.predictor, route.predictor_path,
                                                            route.host_link, shipped.predictor));
  const std::int64_t bytes = shipped.predictor.count;
  auto done = [this, node, bytes, &predictors](bool delivered, const std::string& reason) {
    const std::vector<std::uint64_t> waiting = predictors.end_fetch(node, delivered);
    // The first move still waiting carries the bytes in its row; with none left (they
    // ended while the copy was on its way) the copy is counted apart, never lost.
    bool first = true;
    for (std::uint64_t request : waiting) {
      auto it = moves_.find(request);
      if (it == moves_.end()) continue;
      Move& mv = *it->second;
      if (!mv.awaiting_predictor || node_of(mv.dst_gpu) != node) continue;
      if (!delivered) {
        end_move(mv, MoveOutcome::kFailed, "predictor transfer failed: " + reason);
        continue;
      }
      if (first) {
        mv.rec.predictor_bytes += bytes;
        mv.rec.predictor_source = spec_.cluster.nodes[predictor_source_].name;
        result_.bytes.predictors += bytes;
      }
      first = false;
      mv.awaiting_predictor = false;
      if (mv.transfers_left == 0) on_transfers_done(mv);
    }
    if (delivered && first) result_.predictor_bytes_unclaimed += bytes;
  };
  if (predictor_source_ == node) {
    sim_.schedule_after(host_link_time(bytes),
                        [this, node, done] { done(node_up_[node], "node failed"); });
    return;
  }
  fabric_.send(node_id(predictor_source_), node_id(node), Bytes{bytes}, done);
}

SimTime ServingModel::host_link_time(std::int64_t bytes) const {
  return SimTime{cost_model::leg_ns(MoveRoute::Leg::kLocal, {}, spec_.gpu.host_link, Bytes{bytes})};
}

SimTime ServingModel::host_copy(int gpu, bool to_gpu, std::int64_t bytes, SimTime ready) {
  Gpu& g = gpus_[gpu];
  (to_gpu ? result_.host_links.to_gpu_bytes : result_.host_links.from_gpu_bytes) += bytes;
  return (to_gpu ? g.to_gpu : g.from_gpu).copy(sim_.now(), ready, host_link_time(bytes));
}

void ServingModel::on_transfers_done(Move& m) {
  release_slot(m);
  m.stage = Move::Stage::kRebuilding;
  m.bytes_in = true;
  m.rec.transfer_ns = sim_.now().ns - m.rec.start_ns;
  m.flows.clear();
  if (!m.front_running) rebuild(m);
}

void ServingModel::rebuild(Move& m) {
  m.gpu_ready_ns = sim_.now().ns;
  GpuWorker& worker = *gpus_[m.dst_gpu].worker;
  const std::uint64_t request = m.r->rec.id, id = m.id;
  auto job_done = [this, request, id](SimTime start, SimTime end) {
    Move* mv = find_move(request, id);
    if (!mv) return;
    mv->rec.compute_ns += (end - start).ns;
    mv->rec.queue_ns += std::max<std::int64_t>(0, start.ns - mv->gpu_ready_ns);
    mv->gpu_ready_ns = end.ns;  // its next job waits from here, not from the bytes
    if (--mv->jobs_left == 0) end_move(*mv, MoveOutcome::kDone, "");
  };
  if (m.plan.reconstruct_tokens > 0) {
    ++m.jobs_left;
    worker.submit({JobKind::kReconstruct, request, m.plan.reconstruct_tokens, job_done});
  }
  if (m.plan.replay_tokens > 0) {
    ++m.jobs_left;
    worker.submit(
        {JobKind::kReplay, request, m.plan.replay_tokens, job_done, m.plan.replay_prefix()});
  }
  if (m.jobs_left == 0) end_move(m, MoveOutcome::kDone, "");
}

// ------------------------------------------------------------ endings

void ServingModel::end_move(Move& m, MoveOutcome outcome, const std::string& why) {
  release_slot(m);
  for (const Move::Flow& f : m.flows) fabric_.cancel(f.handle);
  Gpu& dst = gpus_[m.dst_gpu];
  if (outcome != MoveOutcome::kDone && dst.worker->up()) dst.worker->cancel_jobs(m.r->rec.id);
  m.rec.outcome = outcome;
  m.rec.end_ns = sim_.now().ns;
  m.rec.stall_ns = m.rec.end_ns - m.stall_since;
  m.rec.note = why;
  if (outcome != MoveOutcome::kDone) m.rec.delta_nll = 0;  // no rebuild, no quality paid
  if (outcome == MoveOutcome::kDone && m.plan.strategy == Strategy::kRiskKv) {
    result_.predictor_uses[spec_.cluster.nodes[node_of(m.dst_gpu)].name] += 1;
  }
  record(m.rec);
  Request& r = *m.r;
  const int src_gpu = m.src_gpu, dst_gpu = m.dst_gpu, from_node = m.from_node;
  const MoveTrigger trigger = m.rec.trigger;
  const std::int64_t stall = m.stall_since;
  const Pins pins = m.dst_pins;
  moves_.erase(r.rec.id);  // m is gone from here on
  if (outcome == MoveOutcome::kDone) {
    land(r, dst_gpu, src_gpu, pins);
    return;
  }
  if (pins.blocks > 0) {
    unpin_blocks(dst_gpu, std::span<const std::uint64_t>(r.prefix_keys).first(pins.blocks),
                 pins.generation);
  }
  if (dst.worker->up() && router_.holds(dst_gpu, r.rec.id)) unreserve(dst_gpu, r);
  if (trigger == MoveTrigger::kHandoff) {
    const bool prefill_up = src_gpu >= 0 && gpus_[src_gpu].worker->up();
    // The destination went away (drain or failure) while the prefill GPU still holds the KV:
    // hand off elsewhere. Otherwise the transfer itself failed (path, stall, source).
    if (prefill_up && (outcome == MoveOutcome::kCancelled || !dst.worker->up())) {
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
      Request* q = find_request(id);
      if (q && q->epoch == epoch && q->phase == Phase::kHandingOff) try_handoff(*q);
    });
    return;
  }
  if (src_gpu >= 0 && gpus_[src_gpu].worker->up()) {
    // A migration that did not happen: the source still holds the KV; carry on there.
    r.phase = Phase::kDecoding;
    gpus_[src_gpu].worker->add_decoding({r.rec.id, r.context, r.remaining});
    if (outcome == MoveOutcome::kCancelled && node_draining_[gpus_[src_gpu].node]) {
      const int node = gpus_[src_gpu].node;
      sim_.schedule_after(SimTime{}, [this, id = r.rec.id, node, stall, epoch = r.epoch] {
        Request* q = find_request(id);
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
                          Request* q = find_request(id);
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
    Request* q = find_request(id);
    if (q && q->epoch == epoch && q->phase == Phase::kMoving)
      start_move(*q, MoveTrigger::kFailure, -1, stall);
  });
}

void ServingModel::land(Request& r, int dst_gpu, int src_gpu, Pins pins) {
  if (src_gpu >= 0 && router_.holds(src_gpu, r.rec.id)) unreserve(src_gpu, r);
  if (pins.blocks > 0) {  // the destination's cached prefix is the request's own from now
    unpin_prefix(r);      // pins of a cache lost with a failed GPU
    if (gpus_[dst_gpu].cache->generation() == pins.generation) {
      r.pinned = pins.blocks;
      r.pin_gpu = dst_gpu;
      r.pin_generation = pins.generation;
    }
  }
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

ServingModel::PrefixRun ServingModel::cached_at(const Request& r, int gpu) const {
  const PrefixCache* cache = gpus_[gpu].cache.get();
  // The move pins what it reuses and hands the pins over when it lands (after the source's
  // are given back); a request never pins one cache twice.
  const bool pinned_here = r.pin_gpu == gpu && cache && cache->generation() == r.pin_generation;
  if (!cache || r.prefix_keys.empty() || pinned_here) return {};
  return prefix_run(r, gpu);
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
  std::vector<std::uint64_t> open;
  for (const auto& [request, m] : moves_) open.push_back(request);
  for (std::uint64_t request : open) {
    Move& m = *moves_.at(request);
    const char* what = m.stage == Move::Stage::kRebuilding ? "rebuilding on the destination GPU"
                       : m.awaiting_predictor && m.transfers_left == 0
                           ? "waiting for the predictors"
                           : "transferring";
    m.rec.outcome = MoveOutcome::kUnfinished;
    m.rec.end_ns = end_ns_;
    m.rec.stall_ns = end_ns_ - m.stall_since;
    m.rec.note = std::string("still ") + what + " at the end of the run";
    m.rec.delta_nll = 0;
    record(m.rec);
    m.r->rec.reason = std::string("moving: ") + what;
  }
  for (const PendingRecovery& p : pending_recoveries_) {
    Request* found = find_request(p.request);
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
    record(rec);
  }
}

}  // namespace kvshift::sim
