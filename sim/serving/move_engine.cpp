// MoveEngine: a move's transfers, its rebuild and its one ending (see move_engine.hpp).
#include "sim/serving/move_engine.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvshift::sim {
namespace {

NodeId node_id(int node) { return static_cast<NodeId>(node); }

}  // namespace

struct MoveEngine::Move {
  enum class Stage { kTransferring, kRebuilding };
  MoveOrder o;
  std::uint64_t id = 0;  ///< unique within the run; callbacks carry it, not a pointer
  Stage stage = Stage::kTransferring;
  int transfers_left = 0;
  bool awaiting_predictor = false;
  bool in_slot = false;  ///< holds a transfer slot of its destination node
  int jobs_left = 0;
  bool front_running = false;     ///< hybrid: the receiver is still prefilling the front
  bool bytes_in = false;          ///< every transfer (and the predictor) has arrived
  std::int64_t gpu_ready_ns = 0;  ///< since when the move waits for its next GPU job
  int prefix_loads = 0;           ///< the prefix's loads not yet in (local tiers, storage)
  bool ids_pending = false;       ///< hybrid: the front's token ids are still on their way
  std::optional<GpuJob> front;    ///< hybrid: its front, queued once the prefix and ids are in
  /// One of the move's own flows in the network: what a stall needs to hang and resend it.
  struct Flow {
    std::uint64_t seq = 0;  ///< the move's own count of flows sent
    std::uint64_t handle = 0;
    int src = -1, dst = -1;
    std::int64_t bytes = 0;
    Fabric::Done done;
  };
  std::vector<Flow> flows;  ///< those in the network now
  std::uint64_t flow_seq = 0;
};

MoveEngine::MoveEngine(Simulator& sim, Fabric& fabric, MovePort& port, RunResult& result,
                       MoveEngineConfig config)
    : sim_(sim),
      fabric_(fabric),
      port_(port),
      result_(result),
      config_(std::move(config)),
      inflight_(config_.nodes, 0) {}

MoveEngine::~MoveEngine() = default;

// ------------------------------------------------------------ start

void MoveEngine::start(MoveOrder order) {
  if (moves_.count(order.request)) {
    throw std::logic_error("invariant: request " + std::to_string(order.request) +
                           " starts a move while one is in flight");
  }
  auto m = std::make_unique<Move>();
  m->o = std::move(order);
  m->id = ++seq_;
  if (config_.max_inflight_per_destination > 0) {
    m->in_slot = true;
    const int dst = port_.node_of(m->o.dst_gpu);
    if (++inflight_[static_cast<std::size_t>(dst)] > config_.max_inflight_per_destination) {
      throw std::logic_error("invariant: node " + m->o.rec.to + " over its transfer-slot cap");
    }
  }
  const std::uint64_t request = m->o.request;
  moves_[request] = std::move(m);
  launch(request);
}

bool MoveEngine::slot_free(int node) const {
  const int cap = config_.max_inflight_per_destination;
  return cap <= 0 || inflight_[static_cast<std::size_t>(node)] < cap;
}

void MoveEngine::release_slot(Move& m) {
  if (!m.in_slot) return;
  m.in_slot = false;
  --inflight_[static_cast<std::size_t>(port_.node_of(m.o.dst_gpu))];
  port_.slot_freed();
}

MoveEngine::Move* MoveEngine::find(std::uint64_t request, std::uint64_t id) {
  auto it = moves_.find(request);
  return it != moves_.end() && it->second->id == id ? it->second.get() : nullptr;
}

// ------------------------------------------------------------ transferring

void MoveEngine::launch(std::uint64_t request) {
  Move& m = *moves_.at(request);
  const MoveOrder& o = m.o;
  const std::uint64_t id = m.id;
  const int dst = port_.node_of(o.dst_gpu);
  if (o.plan.strategy == Strategy::kRiskKv) {
    PredictorCache& predictors = port_.predictors(o.deployment);
    if (predictors.state(dst) != PredictorCache::State::kResident) {
      m.awaiting_predictor = true;
      if (predictors.state(dst) == PredictorCache::State::kAbsent) begin_predictor_fetch(dst);
      predictors.wait(dst, request);
    }
  }
  // The cached prefix loads from the destination node's host or SSD tier, and from the storage
  // tier, beside the transfers.
  if (o.cached_load.ns > 0) {
    ++m.transfers_left;
    ++m.prefix_loads;
    sim_.schedule_after(o.cached_load, [this, request, id] { prefix_loaded(request, id); });
  }
  if (o.fetch_blocks > 0) {
    ++m.transfers_left;
    ++m.prefix_loads;
    fetch_prefix(m);
  }
  // Over the network a hybrid's front ids travel first, as a flow of their own; on the same
  // node they are in host memory.
  const bool ids_ahead =
      o.plan.front_tokens > 0 && o.plan.tokens.count > 0 && o.src >= 0 && o.src != dst;
  if (o.plan.front_tokens > 0) {
    // Hybrid: the receiver prefills the front once the cached prefix and the ids are in,
    // while the rest of the KV is on its way.
    m.front_running = true;
    auto front_done = [this, request, id](SimTime start, SimTime end) {
      Move* mv = find(request, id);
      if (!mv) return;
      mv->o.rec.compute_ns += (end - start).ns;
      mv->o.rec.queue_ns += start.ns - mv->o.rec.start_ns;
      mv->front_running = false;
      if (mv->bytes_in) rebuild(*mv);
    };
    m.front = GpuJob{JobKind::kReplay, request, o.plan.front_tokens, std::move(front_done),
                     o.plan.cached_tokens};
    m.ids_pending = ids_ahead;
    submit_front_if_ready(m);
  }
  if (o.src >= 0) {
    const Bytes ids = ids_ahead ? o.plan.tokens : Bytes{};
    const Bytes kv = o.plan.kv, tokens = o.plan.tokens - ids;
    // The transfer engine builds and posts the KV's descriptors before any byte flows.
    const std::int64_t setup =
        kv.count > 0 ? cost_model::engine_ns(config_.engine, o.plan.descriptors) : 0;
    const SimTime delay{std::max(setup, o.ids_lead_ns)};
    const int src = o.src;
    if (ids.count > 0) send_part(m, src, dst, {}, ids, {});
    Move* alive = find(request, id);  // a send may fail at once
    if (alive && kv.count + tokens.count > 0) send_part(*alive, src, dst, kv, tokens, delay);
  }
  Move* still = find(request, id);
  if (still && still->transfers_left == 0 && !still->awaiting_predictor) on_transfers_done(*still);
}

void MoveEngine::submit_front_if_ready(Move& m) {
  if (!m.front || m.prefix_loads > 0 || m.ids_pending) return;
  port_.worker(m.o.dst_gpu).submit(std::move(*m.front));
  m.front.reset();
}

void MoveEngine::prefix_loaded(std::uint64_t request, std::uint64_t id) {
  Move* m = find(request, id);
  if (!m) return;
  --m->prefix_loads;
  submit_front_if_ready(*m);
  if (--m->transfers_left == 0 && !m->awaiting_predictor) on_transfers_done(*m);
}

void MoveEngine::fetch_prefix(Move& m) {
  const std::uint64_t request = m.o.request, id = m.id;
  const int store = port_.storage_node(), dst = port_.node_of(m.o.dst_gpu);
  const std::int64_t bytes =
      static_cast<std::int64_t>(m.o.fetch_blocks) * port_.storage_block_bytes();
  Fabric::Done done = [this, request, id, bytes](bool delivered, const std::string& reason) {
    Move* mv = find(request, id);
    if (!mv) return;
    if (!delivered) {
      end(*mv, MoveOutcome::kFailed, "the prefix fetch from the storage tier failed: " + reason);
      return;
    }
    sim_.schedule_at(port_.host_copy(mv->o.dst_gpu, true, bytes),
                     [this, request, id] { prefix_loaded(request, id); });
  };
  send_flow(m, store, dst, bytes, done);
}

void MoveEngine::send_part(Move& m, int src, int dst, Bytes kv, Bytes tokens, SimTime delay) {
  const std::uint64_t request = m.o.request, id = m.id;
  const std::int64_t bytes = kv.count + tokens.count;
  auto done = [this, request, id, kv, tokens](bool delivered, const std::string& reason) {
    Move* mv = find(request, id);
    if (!mv) return;
    if (!delivered) {
      end(*mv, MoveOutcome::kFailed, "transfer failed: " + reason);
      return;
    }
    result_.bytes.kv += kv.count;
    result_.bytes.tokens += tokens.count;
    mv->o.rec.kv_bytes += kv.count;
    mv->o.rec.token_bytes += tokens.count;
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

void MoveEngine::start_flow(std::uint64_t request, std::uint64_t id, int src, int dst,
                            std::int64_t bytes, const Fabric::Done& done) {
  Move* m = find(request, id);
  if (!m) return;
  const std::optional<EventKind> fault = port_.path_fault(src, dst);
  if (fault == EventKind::kPathFailure) {
    done(false, "the path " + port_.node_name(src) + " -> " + port_.node_name(dst) + " is failed");
    return;
  }
  if (fault) {  // a stall: the transfer hangs
    hang(request, id, src, dst, bytes, done);
    return;
  }
  if (src == dst) {  // same node: the bytes cross the host link, not the network
    sim_.schedule_at(port_.host_copy(m->o.dst_gpu, true, bytes), [done] { done(true, ""); });
    return;
  }
  send_flow(*m, src, dst, bytes, done);
}

void MoveEngine::send_flow(Move& m, int src, int dst, std::int64_t bytes,
                           const Fabric::Done& done) {
  // A delivered flow leaves the move's list at once: a later stall on its path must not
  // post it again, nor cancel a newer flow by a handle the fabric has reused.
  const std::uint64_t request = m.o.request, id = m.id, seq = ++m.flow_seq;
  Fabric::Done arrived = [this, request, id, seq, done](bool delivered, const std::string& why) {
    if (Move* mv = find(request, id)) {
      std::erase_if(mv->flows, [seq](const Move::Flow& f) { return f.seq == seq; });
    }
    done(delivered, why);
  };
  const std::uint64_t handle =
      fabric_.send(node_id(src), node_id(dst), Bytes{bytes}, std::move(arrived));
  m.flows.push_back({seq, handle, src, dst, bytes, done});
}

void MoveEngine::hang(std::uint64_t request, std::uint64_t id, int src, int dst, std::int64_t bytes,
                      const Fabric::Done& done) {
  if (const std::optional<Seconds> timeout = config_.stall_timeout) {
    sim_.schedule_after(from_seconds(*timeout), [this, request, id, src, dst, t = *timeout] {
      if (Move* mv = find(request, id)) {
        end(*mv, MoveOutcome::kFailed,
            "transfer stalled on " + port_.node_name(src) + " -> " + port_.node_name(dst) +
                ": timed out after " + format_ms(t));
      }
    });
    return;
  }
  // No timeout: it hangs until the stall clears, then starts again.
  port_.when_stall_clears(src, dst, [this, request, id, src, dst, bytes, done] {
    start_flow(request, id, src, dst, bytes, done);
  });
}

void MoveEngine::begin_predictor_fetch(int node) {
  const int deployment = port_.deployment_at(node);
  PredictorCache& predictors = port_.predictors(deployment);
  cost_model::MovePlan shipped;
  shipped.strategy = Strategy::kRiskKv;
  shipped.predictor = Bytes{port_.predictor_bytes(deployment)};
  const cost_model::MoveRoute route = port_.route(shipped, -1, node);
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
      if (!mv.awaiting_predictor || port_.node_of(mv.o.dst_gpu) != node) continue;
      if (!delivered) {
        end(mv, MoveOutcome::kFailed, "predictor transfer failed: " + reason);
        continue;
      }
      if (first) {
        mv.o.rec.predictor_bytes += bytes;
        mv.o.rec.predictor_source = port_.node_name(port_.predictor_source());
        result_.bytes.predictors += bytes;
      }
      first = false;
      mv.awaiting_predictor = false;
      if (mv.transfers_left == 0) on_transfers_done(mv);
    }
    if (delivered && first) result_.predictor_bytes_unclaimed += bytes;
  };
  const int source = port_.predictor_source();
  if (source == node) {
    sim_.schedule_after(port_.host_link_time(bytes),
                        [this, node, done] { done(port_.node_up(node), "node failed"); });
    return;
  }
  fabric_.send(node_id(source), node_id(node), Bytes{bytes}, done);
}

// ------------------------------------------------------------ rebuilding

void MoveEngine::on_transfers_done(Move& m) {
  release_slot(m);
  m.stage = Move::Stage::kRebuilding;
  m.bytes_in = true;
  m.o.rec.transfer_ns = sim_.now().ns - m.o.rec.start_ns;
  m.flows.clear();
  if (!m.front_running) rebuild(m);
}

void MoveEngine::rebuild(Move& m) {
  m.gpu_ready_ns = sim_.now().ns;
  GpuWorker& worker = port_.worker(m.o.dst_gpu);
  const std::uint64_t request = m.o.request, id = m.id;
  auto job_done = [this, request, id](SimTime start, SimTime end_time) {
    Move* mv = find(request, id);
    if (!mv) return;
    mv->o.rec.compute_ns += (end_time - start).ns;
    mv->o.rec.queue_ns += std::max<std::int64_t>(0, start.ns - mv->gpu_ready_ns);
    mv->gpu_ready_ns = end_time.ns;  // its next job waits from here, not from the bytes
    if (--mv->jobs_left == 0) end(*mv, MoveOutcome::kDone, "");
  };
  const cost_model::MovePlan& plan = m.o.plan;
  if (plan.reconstruct_tokens > 0) {
    ++m.jobs_left;
    worker.submit({JobKind::kReconstruct, request, plan.reconstruct_tokens, job_done});
  }
  if (plan.replay_tokens > 0) {
    ++m.jobs_left;
    worker.submit({JobKind::kReplay, request, plan.replay_tokens, job_done, plan.replay_prefix()});
  }
  if (m.jobs_left == 0) end(m, MoveOutcome::kDone, "");
}

// ------------------------------------------------------------ endings

void MoveEngine::end(Move& m, MoveOutcome outcome, const std::string& why) {
  release_slot(m);
  for (const Move::Flow& f : m.flows) fabric_.cancel(f.handle);
  GpuWorker& dst = port_.worker(m.o.dst_gpu);
  if (outcome != MoveOutcome::kDone && dst.up()) dst.cancel_jobs(m.o.request);
  MoveRecord& rec = m.o.rec;
  rec.outcome = outcome;
  rec.end_ns = sim_.now().ns;
  rec.stall_ns = rec.end_ns - m.o.stall_since;
  rec.note = why;
  if (outcome != MoveOutcome::kDone) rec.delta_nll = 0;  // no rebuild, no quality paid
  if (outcome == MoveOutcome::kDone && m.o.plan.strategy == Strategy::kRiskKv) {
    result_.predictor_uses[port_.node_name(port_.node_of(m.o.dst_gpu))] += 1;
  }
  port_.record(rec);
  const MoveEnding ending{m.o.request,   outcome,         why,
                          rec.trigger,   m.o.src_gpu,     m.o.dst_gpu,
                          m.o.from_node, m.o.stall_since, m.o.dst_pins};
  moves_.erase(m.o.request);  // m is gone from here on
  port_.move_ended(ending);
}

std::vector<std::uint64_t> MoveEngine::fail_touching(const std::function<bool(int gpu)>& gone,
                                                     const std::string& why) {
  std::vector<std::uint64_t> broken;
  for (const auto& [request, m] : moves_) {
    if (gone(m->o.dst_gpu) || (m->o.src_gpu >= 0 && gone(m->o.src_gpu))) broken.push_back(request);
  }
  for (std::uint64_t request : broken) {
    auto it = moves_.find(request);
    if (it != moves_.end()) end(*it->second, MoveOutcome::kFailed, why);
  }
  return broken;
}

void MoveEngine::cancel_into(int node, const std::string& why) {
  std::vector<std::uint64_t> inbound;
  for (const auto& [request, m] : moves_) {
    if (port_.node_of(m->o.dst_gpu) == node) inbound.push_back(request);
  }
  for (std::uint64_t request : inbound) end(*moves_.at(request), MoveOutcome::kCancelled, why);
}

void MoveEngine::stall_path(int src, int dst) {
  // A hung transfer is posted again whole once the stall clears (what was sent before it is
  // not kept).
  for (const auto& [request, m] : moves_) {
    std::vector<Move::Flow> hit;
    std::erase_if(m->flows, [&](const Move::Flow& f) {
      if (f.src != src || f.dst != dst) return false;
      hit.push_back(f);
      return true;
    });
    for (const Move::Flow& f : hit) {
      fabric_.cancel(f.handle);
      hang(request, m->id, f.src, f.dst, f.bytes, f.done);
    }
  }
}

void MoveEngine::fail_path(int src, int dst) {
  std::vector<std::uint64_t> broken;
  for (const auto& [request, m] : moves_) {
    const cost_model::MovePlan& plan = m->o.plan;
    if (m->stage == Move::Stage::kTransferring && m->o.src == src &&
        port_.node_of(m->o.dst_gpu) == dst && (plan.kv.count > 0 || plan.tokens.count > 0)) {
      broken.push_back(request);
    }
  }
  for (std::uint64_t request : broken) {
    const auto it = moves_.find(request);
    if (it == moves_.end()) continue;
    end(*it->second, MoveOutcome::kFailed,
        "the path " + port_.node_name(src) + " -> " + port_.node_name(dst) + " failed");
  }
}

void MoveEngine::close(
    const std::function<void(std::uint64_t request, const std::string& what)>& what) {
  // Moves still running at the end: their latency so far is a lower bound.
  for (const auto& [request, m] : moves_) {
    const char* doing = m->stage == Move::Stage::kRebuilding ? "rebuilding on the destination GPU"
                        : m->awaiting_predictor && m->transfers_left == 0
                            ? "waiting for the predictors"
                            : "transferring";
    MoveRecord& rec = m->o.rec;
    rec.outcome = MoveOutcome::kUnfinished;
    rec.end_ns = config_.end_ns;
    rec.stall_ns = config_.end_ns - m->o.stall_since;
    rec.note = std::string("still ") + doing + " at the end of the run";
    rec.delta_nll = 0;
    port_.record(rec);
    what(request, doing);
  }
}

}  // namespace kvshift::sim
