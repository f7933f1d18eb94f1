// ServingModel: decode progress and KV replica streaming.
#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

using namespace serving_detail;

// ------------------------------------------------------------ decoding and replicas

void ServingModel::on_decoded(int gpu, std::span<const DecodeState> batch, std::int64_t steps) {
  due_flushes_.clear();
  for (const DecodeState& s : batch) {
    Request& r = request(s.request);
    r.context = s.context;
    r.remaining = s.remaining;
    if (r.replica < 0 || s.remaining <= 0) continue;
    r.unstreamed += steps;
    if (r.unstreamed >= spec_.protection.stream_every_tokens) {
      due_flushes_.emplace_back(&r, r.unstreamed);
      r.unstreamed = 0;
    }
  }
  if (!due_flushes_.empty()) stream(gpu, due_flushes_);
}

void ServingModel::on_finished(int gpu, std::uint64_t id) {
  Request& r = request(id);
  (void)gpu;
  r.phase = Phase::kDone;
  r.remaining = 0;
  r.rec.finish_ns = sim_.now().ns;
  r.rec.outcome = RequestOutcome::kCompleted;
  release_gpu(r);
  drop_replica(r);
  admit_pending();
}

void ServingModel::drop_replica(Request& r) {
  if (r.replica < 0) return;
  replicas_->remove(r.replica, r.replica_bytes, kv_bytes(r.rec.deployment, r.replicated));
  replicas_->unbook(r.replica, r.replica_booked);
  r.replica_bytes = 0;
  r.replica_booked = 0;
  r.replicated = 0;
  r.replica = -1;
  // Room came free: the oldest requests still waiting for a replica may take it.
  while (!unprotected_.empty()) {
    Request* q = find_request(unprotected_.front());
    if (!q || q->phase == Phase::kDone || q->replica >= 0 || q->gpu < 0 ||
        on_prefill_pool(q->gpu)) {
      unprotected_.pop_front();  // gone, moving (it is placed again where it lands), or P/D
      continue;
    }
    if (!place_replica(*q, node_of(q->gpu))) break;
    q->unstreamed = q->context;  // its whole KV so far goes to the new replica
    unprotected_.pop_front();
  }
}

void ServingModel::protect(Request& r, int gpu_node) {
  if (place_replica(r, gpu_node)) return;
  if (!r.waited_for_replica) {
    r.waited_for_replica = true;
    ++result_.unprotected;
  }
  unprotected_.push_back(r.rec.id);
}

bool ServingModel::place_replica(Request& r, int gpu_node) {
  // The replica books the request's final protected size, as admission books HBM.
  const std::int64_t bytes =
      protected_bytes_per_token(r.rec.deployment) * (r.rec.prompt_tokens + r.rec.output_tokens);
  r.replica = replicas_->pick(gpu_node, bytes, [&](int i) {
    return node_up_[i] && (i == gpu_node || fabric_.reachable(node_id(gpu_node), node_id(i)));
  });
  if (r.replica < 0) return false;
  replicas_->book(r.replica, bytes);
  r.replica_booked = bytes;
  fit_host_tier(r.replica);  // the prefix blocks there make room
  return true;
}

void ServingModel::stream(int gpu, std::span<std::pair<Request*, std::int64_t>> items) {
  const int d = node_deployment_[static_cast<std::size_t>(node_of(gpu))];  // its requests'
  const std::int64_t per_token = protected_bytes_per_token(d);
  if (per_token <= 0) return;
  // One flush per replica node carries every request's new KV from this GPU. A stable
  // insertion sort groups them (a batch is small, and it allocates nothing).
  for (std::size_t i = 1; i < items.size(); ++i) {
    for (std::size_t j = i; j > 0 && items[j - 1].first->replica > items[j].first->replica; --j)
      std::swap(items[j - 1], items[j]);
  }
  for (std::size_t begin = 0, end; begin < items.size(); begin = end) {
    const int replica = items[begin].first->replica;
    std::uint32_t slot;
    if (free_flushes_.empty()) {
      slot = static_cast<std::uint32_t>(flushes_.size());
      flushes_.emplace_back();
    } else {
      slot = free_flushes_.back();
      free_flushes_.pop_back();
    }
    StreamFlush& flush = flushes_[slot];
    flush.replica = replica;
    flush.per_token = per_token;
    flush.parts.clear();
    // A local replica (the node's own host DRAM) is written over the host link.
    std::int64_t bytes = 0, descriptors = 0;
    for (end = begin; end < items.size() && items[end].first->replica == replica; ++end) {
      const auto [r, tokens] = items[end];
      bytes += tokens * per_token;
      if (!engine_.ideal()) descriptors += stream_descriptors(d, tokens);
      flush.parts.push_back({r->rec.id, tokens, r->epoch});
    }
    Fabric::Done done = [this, slot](bool delivered, const std::string&) {
      on_flushed(slot, delivered);
    };
    // The transfer engine posts the flush's descriptors first, as for any KV transfer.
    const std::int64_t setup = cost_model::engine_ns(engine_, descriptors);
    if (setup > 0) {
      sim_.schedule_after(SimTime{setup},
                          [this, gpu, replica, bytes, done = std::move(done)]() mutable {
                            send_stream(gpu, replica, bytes, std::move(done));
                          });
    } else {
      send_stream(gpu, replica, bytes, std::move(done));
    }
  }
}

void ServingModel::on_flushed(std::uint32_t slot, bool delivered) {
  free_flushes_.push_back(slot);  // free already: nothing below sends a flush
  const StreamFlush& flush = flushes_[slot];
  if (!delivered) return;  // the request re-streams if it still needs to
  for (const auto& [id, tokens, epoch] : flush.parts) {
    result_.bytes.replica_stream += tokens * flush.per_token;
    Request* r = find_request(id);
    if (!r || r->epoch != epoch || r->phase == Phase::kDone || r->replica != flush.replica) {
      continue;
    }
    r->replicated += tokens;
    r->replica_bytes += tokens * flush.per_token;
    replicas_->add(flush.replica, tokens * flush.per_token, kv_bytes(r->rec.deployment, tokens));
  }
}

void ServingModel::send_stream(int gpu, int replica, std::int64_t bytes, Fabric::Done done) {
  const int src = node_of(gpu);
  if (src == replica) {  // into its own node's host DRAM, over the GPU's host link
    sim_.schedule_at(host_copy(gpu, false, bytes),
                     [this, src, done = std::move(done)] { done(node_up_[src], "node failed"); });
    return;
  }
  const auto fault = path_faults_.empty() ? path_faults_.end() : path_faults_.find({src, replica});
  if (fault == path_faults_.end()) {
    fabric_.send(node_id(src), node_id(replica), Bytes{bytes}, std::move(done));
  } else if (fault->second == EventKind::kPathFailure || spec_.transfer_engine.stall_timeout) {
    // A failed path loses the flush; so does a stall with a timeout (the flush would time out).
    sim_.schedule_after(SimTime{}, [done] { done(false, "path fault"); });
  } else {  // a stall without a timeout: the flush waits for it to clear
    stalled_[{src, replica}].push_back(
        [this, gpu, replica, bytes, done] { send_stream(gpu, replica, bytes, done); });
  }
}

std::int64_t ServingModel::stream_descriptors(int d, std::int64_t tokens) const {
  const ProtectedKv p = protected_kv(d);
  const std::int64_t kept =
      p.token_share == 1 ? tokens : std::llround(p.token_share * static_cast<double>(tokens));
  return cost_model::kv_descriptors(engine_, kept, p.layers);
}

}  // namespace kvshift::sim
