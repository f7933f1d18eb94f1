// ServingModel: decode progress and KV replicas: where they are placed, what
// they hold, and what a landed flush adds (the flushes are ReplicaStreams).
#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

using namespace serving_detail;

// ------------------------------------------------------------ decoding and replicas

void ServingModel::on_decoded(int gpu, std::span<const DecodeState> batch, std::int64_t steps) {
  due_flushes_.clear();
  const bool up = gpus_[gpu].worker->up();  // a failing GPU's last steps stream nothing
  for (const DecodeState& s : batch) {
    Request& r = requests_.at(s.request);
    r.context = s.context;
    r.remaining = s.remaining;
    if (r.replica < 0 || s.remaining <= 0 || !up) continue;
    r.unstreamed += steps;
    if (r.unstreamed >= spec_.protection.stream_every_tokens) {
      due_flushes_.push_back({r.replica, {r.rec.id, r.unstreamed, r.epoch}});
      r.unstreamed = 0;
    }
  }
  if (!due_flushes_.empty()) stream(gpu, due_flushes_);
}

void ServingModel::on_finished(int gpu, std::uint64_t id) {
  Request& r = requests_.at(id);
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
  replicas_->remove(r.replica, r.replica_bytes, deployment(r).kv_bytes(r.replicated));
  replicas_->unbook(r.replica, r.replica_booked);
  r.replica_bytes = 0;
  r.replica_booked = 0;
  r.replicated = 0;
  r.replica = -1;
  // Room came free: the oldest requests still waiting for a replica may take it.
  while (!unprotected_.empty()) {
    Request* q = requests_.find(unprotected_.front());
    if (!q || q->phase == Phase::kDone || q->replica >= 0 || q->gpu < 0 ||
        gpus_[q->gpu].prefill_only) {
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
      deployment(r).protected_kv.per_token * (r.rec.prompt_tokens + r.rec.output_tokens);
  r.replica = replicas_->pick(gpu_node, bytes, [&](int i) {
    return node_up_[i] && (i == gpu_node || fabric_.reachable(node_id(gpu_node), node_id(i)));
  });
  if (r.replica < 0) return false;
  replicas_->book(r.replica, bytes);
  r.replica_booked = bytes;
  tiers_->fit_host_tier(r.replica);  // the prefix blocks there make room
  return true;
}

void ServingModel::stream(int gpu, std::span<std::pair<int, ReplicaStreams::Part>> due) {
  const int node = node_of(gpu);
  streams_.send(gpu, node, served_at(node).protected_kv, due);  // its requests' deployment
}

void ServingModel::on_flushed(int replica, std::int64_t per_token,
                              std::span<const ReplicaStreams::Part> parts) {
  for (const auto& [id, tokens, epoch] : parts) {
    result_.bytes.replica_stream += tokens * per_token;
    Request* r = requests_.find(id);
    if (!r || r->epoch != epoch || r->phase == Phase::kDone || r->replica != replica) continue;
    r->replicated += tokens;
    r->replica_bytes += tokens * per_token;
    replicas_->add(replica, tokens * per_token, deployment(*r).kv_bytes(tokens));
  }
}

}  // namespace kvshift::sim
