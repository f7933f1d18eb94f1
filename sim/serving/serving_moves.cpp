// ServingModel: migrations and recoveries — feasibility, the adaptive choice,
// transfers, the receiving GPU's work, and failed moves.
#include "sim/serving/serving_model_internal.hpp"

#include <algorithm>
#include <cmath>

#include "cost_model/storage.hpp"

namespace kvshift::sim {

using namespace serving_detail;

// ------------------------------------------------------------ moves

bool ServingModel::feasible(Strategy s, bool from_replica) const {
  if (lossy(s) && spec_.policies.quality_budget &&
      strategy_delta_nll(s) > *spec_.policies.quality_budget) {
    return false;
  }
  if (s == Strategy::kRiskKv && (!spec_.risk_kv || spec_.risk_kv->topology.empty())) return false;
  if (s == Strategy::kProxyKv && !spec_.proxy_kv) return false;
  if (!from_replica || s == Strategy::kTokenReplay) return true;
  switch (spec_.protection.mode) {
    case ProtectionMode::kNone: return false;
    case ProtectionMode::kFull: return true;
    case ProtectionMode::kRiskKv: return s == Strategy::kRiskKv;
    case ProtectionMode::kProxyKv: return s == Strategy::kProxyKv;
  }
  return false;
}

double ServingModel::predict_s(Strategy s, const Request& r, int src, int dst_gpu) {
  const int dst = node_of(dst_gpu);
  const bool from_replica = r.phase != Phase::kDecoding;
  const std::int64_t available = from_replica ? r.replicated : r.context;
  const std::int64_t tail = r.context - available;
  auto transfer_s = [&](int from, std::int64_t bytes) {
    if (from < 0 || bytes <= 0) return 0.0;
    if (from == dst) return 8.0 * static_cast<double>(bytes) / spec_.gpu.host_link.value;
    const auto path = fabric_.path(from, dst);
    if (!path) return 1e30;
    return path->latency.value + 8.0 * static_cast<double>(bytes) / fabric_.available_bps(from, dst);
  };
  double t = gpus_[dst_gpu]->worker->backlog().seconds();
  const std::int64_t full = kv_bytes(available);
  switch (s) {
    case Strategy::kFullKv:
      t += transfer_s(src, full) + costs_.prefill(tail).seconds();
      break;
    case Strategy::kTokenReplay:
      t += transfer_s(src, kTokenIdBytes * r.context) + costs_.prefill(r.context).seconds();
      break;
    case Strategy::kRiskKv: {
      const std::int64_t kept = cost_model::storage(spec_.model, spec_.risk_kv->topology,
                                                    available, {})
                                    .kv_kept.count;
      double ship = transfer_s(src, kept);
      if (predictor_cached_[dst] == 0) ship = std::max(ship, transfer_s(predictor_source_, predictor_bytes_));
      t += ship + costs_.reconstruct(available, 1).seconds() + costs_.prefill(tail).seconds();
      break;
    }
    case Strategy::kProxyKv:
      t += transfer_s(src, std::llround(spec_.proxy_kv->retention * static_cast<double>(full))) +
           costs_.prefill(tail).seconds();
      break;
    case Strategy::kAdaptive: break;
  }
  return t;
}

Strategy ServingModel::choose(const Request& r, bool from_replica, int src, int dst_gpu,
                              std::string* note) {
  auto ok = [&](Strategy s) {
    if (s == Strategy::kProxyKv && !r.scored) return false;
    if (from_replica && src < 0 && s != Strategy::kTokenReplay) return false;  // no replica
    return feasible(s, from_replica);
  };
  if (strategy_ != Strategy::kAdaptive) {
    if (ok(strategy_)) return strategy_;
    const Strategy fallback = ok(Strategy::kFullKv) ? Strategy::kFullKv : Strategy::kTokenReplay;
    *note = std::string("fallback to ") + strategy_name(fallback) + ": " +
            strategy_name(strategy_) + " not possible here (protection " +
            protection_name(spec_.protection.mode) + ", quality budget or missing scores)";
    return fallback;
  }
  Strategy best = Strategy::kTokenReplay;
  double best_s = 1e300;
  for (Strategy s : {Strategy::kFullKv, Strategy::kTokenReplay, Strategy::kRiskKv,
                     Strategy::kProxyKv}) {
    if (!ok(s)) continue;
    const double t = predict_s(s, r, src, dst_gpu);
    if (t < best_s) {
      best_s = t;
      best = s;
    }
  }
  return best;
}

void ServingModel::start_move(Request& r, MoveTrigger trigger, int from_node,
                              std::int64_t stall_since) {
  if (r.phase == Phase::kDone || moves_.count(r.rec.id)) return;
  const bool from_replica = trigger == MoveTrigger::kFailure;
  const int dst_gpu = route(r.reserved, from_node);
  if (dst_gpu < 0) {
    if (from_replica) pending_recoveries_.emplace_back(r.rec.id, stall_since);
    return;  // a migration with nowhere to go simply does not happen
  }
  int src = from_node;
  if (from_replica) src = r.replica >= 0 && node_up_[r.replica] ? r.replica : -1;
  int src_gpu = -1;
  if (!from_replica) {
    src_gpu = r.gpu;
    std::optional<DecodeState> st = gpus_[src_gpu]->worker->remove_decoding(r.rec.id);
    if (!st) return;  // not decoding (still in prefill): it moves after its prefill
    r.unstreamed += st->context - r.context;
    r.context = st->context;
    r.remaining = st->remaining;
  }
  std::string note;
  const Strategy s = choose(r, from_replica, src, dst_gpu, &note);
  Gpu& dst = *gpus_[dst_gpu];
  reserve(dst, r);
  r.phase = Phase::kMoving;

  auto m = std::make_unique<Move>();
  m->r = &r;
  m->strategy = s;
  m->epoch = r.epoch;
  m->src_gpu = src_gpu;
  m->dst_gpu = dst_gpu;
  m->stall_since = stall_since;
  m->available = from_replica ? r.replicated : r.context;
  if (s == Strategy::kTokenReplay) m->available = 0;
  m->tail = r.context - m->available;
  m->rec.request = r.rec.id;
  m->rec.trigger = trigger;
  m->rec.from = from_node >= 0 ? spec_.cluster.nodes[from_node].name : "";
  m->rec.to = spec_.cluster.nodes[dst.node].name;
  m->rec.strategy = strategy_name(s);
  m->rec.context_tokens = r.context;
  m->rec.available_tokens = s == Strategy::kTokenReplay ? r.context : m->available;
  m->rec.tail_tokens = m->tail;
  m->rec.source = src >= 0 ? spec_.cluster.nodes[src].name : "";
  m->rec.start_ns = sim_.now().ns;
  m->rec.delta_nll = strategy_delta_nll(s);
  m->rec.note = note;
  Move& move = *m;
  moves_[r.rec.id] = std::move(m);

  const int dst_node = dst.node;
  const std::int64_t full = kv_bytes(move.available);
  switch (s) {
    case Strategy::kFullKv:
      transfer_part(move, src, dst_node, full, &BytesByKind::kv);
      break;
    case Strategy::kTokenReplay:
      transfer_part(move, src, dst_node, kTokenIdBytes * r.context, &BytesByKind::tokens);
      break;
    case Strategy::kRiskKv: {
      const std::int64_t kept =
          cost_model::storage(spec_.model, spec_.risk_kv->topology, move.available, {}).kv_kept.count;
      transfer_part(move, src, dst_node, kept, &BytesByKind::kv);
      result_.predictor_uses[spec_.cluster.nodes[dst_node].name] += 1;
      if (predictor_cached_[dst_node] == 0) {
        transfer_part(move, predictor_source_, dst_node, predictor_bytes_, &BytesByKind::predictors);
      }
      break;
    }
    case Strategy::kProxyKv:
      transfer_part(move, src, dst_node,
                    std::llround(spec_.proxy_kv->retention * static_cast<double>(full)),
                    &BytesByKind::kv);
      break;
    case Strategy::kAdaptive: break;
  }
  if (move.parts == 0) on_transfers_done(move);
}

void ServingModel::transfer_part(Move& m, int src, int dst, std::int64_t bytes,
                                 std::int64_t BytesByKind::*kind) {
  if (src < 0 || bytes <= 0) return;  // nothing to ship (ids held by the router)
  const std::uint64_t id = m.r->rec.id;
  const std::uint32_t epoch = m.epoch;
  auto done = [this, id, epoch, bytes, kind](bool delivered, const std::string& reason) {
    auto it = moves_.find(id);
    if (it == moves_.end() || it->second->epoch != epoch) return;
    Move& mv = *it->second;
    if (!delivered) {
      fail_move(mv, "transfer failed: " + reason);
      return;
    }
    result_.bytes.*kind += bytes;
    if (kind == &BytesByKind::predictors) {
      const int node = gpus_[mv.dst_gpu]->node;
      const auto budget = spec_.predictors.hbm_budget;
      if (!budget || budget->count >= predictor_bytes_) predictor_cached_[node] = predictor_bytes_;
      mv.rec.predictor_bytes += bytes;
    } else if (kind == &BytesByKind::tokens) {
      mv.rec.token_bytes += bytes;
    } else {
      mv.rec.kv_bytes += bytes;
    }
    if (--mv.parts == 0) on_transfers_done(mv);
  };
  ++m.parts;
  if (src == dst) {
    // Same node: the bytes cross the host link, not the network.
    const SimTime t = from_seconds(8.0 * static_cast<double>(bytes) / spec_.gpu.host_link.value);
    sim_.schedule_after(t, [done] { done(true, ""); });
    return;
  }
  m.transfers.push_back(fabric_.send(src, dst, bytes, done));
}

void ServingModel::on_transfers_done(Move& m) {
  m.transfers_done_ns = sim_.now().ns;
  m.rec.transfer_ns = m.transfers_done_ns - m.rec.start_ns;
  Request& r = *m.r;
  if (m.src_gpu >= 0) {  // a migration frees its source once the bytes have left
    Gpu& src = *gpus_[m.src_gpu];
    unreserve(src, r);
    m.src_gpu = -1;
  }
  GpuWorker& worker = *gpus_[m.dst_gpu]->worker;
  const std::uint64_t id = r.rec.id;
  const std::uint32_t epoch = m.epoch;
  auto job_done = [this, id, epoch](SimTime start, SimTime end) {
    auto it = moves_.find(id);
    if (it == moves_.end() || it->second->epoch != epoch) return;
    Move& mv = *it->second;
    mv.rec.compute_ns += (end - start).ns;
    mv.rec.queue_ns += std::max<std::int64_t>(0, start.ns - mv.transfers_done_ns);
    if (--mv.jobs == 0) finish_move(mv);
  };
  if (m.strategy == Strategy::kRiskKv && m.available > 0) {
    ++m.jobs;
    worker.submit({JobKind::kReconstruct, id, m.available, job_done});
  }
  if (m.tail > 0) {
    ++m.jobs;
    worker.submit({JobKind::kReplay, id, m.tail, job_done});
  }
  if (m.jobs == 0) finish_move(m);
}

void ServingModel::finish_move(Move& m) {
  Request& r = *m.r;
  const int dst_node = gpus_[m.dst_gpu]->node;
  r.gpu = m.dst_gpu;
  r.phase = Phase::kDecoding;
  r.attempts = 0;
  r.rec.moves += 1;
  r.rec.final_node = spec_.cluster.nodes[dst_node].name;
  m.rec.end_ns = sim_.now().ns;
  m.rec.stall_ns = m.rec.end_ns - m.stall_since;
  result_.moves.push_back(m.rec);
  if (r.replica == dst_node) {  // a request cannot be its own replica
    drop_replica(r);
    r.replica = pick_replica(dst_node);
  }
  if (r.replica >= 0 && r.replicated < r.context) r.unstreamed = r.context - r.replicated;
  gpus_[m.dst_gpu]->worker->add_decoding({r.rec.id, r.context, r.remaining});
  moves_.erase(r.rec.id);  // m is gone from here on
  admit_pending();
}

void ServingModel::fail_move(Move& m, const std::string& reason) {
  Request& r = *m.r;
  for (std::uint64_t t : m.transfers) fabric_.cancel(t);
  m.rec.ok = false;
  m.rec.end_ns = sim_.now().ns;
  m.rec.stall_ns = m.rec.end_ns - m.stall_since;
  m.rec.note = reason;
  result_.moves.push_back(m.rec);
  Gpu& dst = *gpus_[m.dst_gpu];
  if (dst.worker->up()) {
    unreserve(dst, r);
  }
  const std::int64_t stall = m.stall_since;
  const int src_gpu = m.src_gpu;
  moves_.erase(r.rec.id);
  if (src_gpu >= 0 && gpus_[src_gpu]->worker->up()) {
    // A migration that failed on the way: the source still holds the KV; carry on there.
    r.gpu = src_gpu;
    r.phase = Phase::kDecoding;
    gpus_[src_gpu]->worker->add_decoding({r.rec.id, r.context, r.remaining});
    return;
  }
  r.gpu = -1;
  ++r.epoch;
  if (++r.attempts >= kMaxMoveAttempts) {
    fail_request(r, "gave up after " + std::to_string(kMaxMoveAttempts) + " failed moves: " + reason);
    return;
  }
  // The KV that was on its way is gone; recover from the replica (or by replay).
  r.phase = Phase::kMoving;
  sim_.schedule_after(SimTime{}, [this, &r, stall, epoch = r.epoch] {
    if (r.epoch == epoch && r.phase == Phase::kMoving) {
      start_move(r, MoveTrigger::kFailure, -1, stall);
    }
  });
}

void ServingModel::fail_request(Request& r, const std::string& reason) {
  release_gpu(r);
  r.phase = Phase::kDone;
  r.rec.outcome = RequestOutcome::kFailed;
  r.rec.failure_reason = reason;
  r.rec.finish_ns = sim_.now().ns;
  drop_replica(r);
  admit_pending();
}

}  // namespace kvshift::sim
