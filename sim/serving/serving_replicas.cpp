// ServingModel: decode progress and KV replica streaming.
#include "sim/serving/serving_model_internal.hpp"

#include <map>
#include <tuple>

namespace kvshift::sim {

using namespace serving_detail;

// ------------------------------------------------------------ decoding and replicas

void ServingModel::on_decoded(int gpu, const std::vector<DecodeState>& batch, std::int64_t steps) {
  std::vector<std::pair<Request*, std::int64_t>> flush;
  for (const DecodeState& s : batch) {
    Request& r = request(s.request);
    r.context = s.context;
    r.remaining = s.remaining;
    if (r.replica < 0 || s.remaining <= 0) continue;
    r.unstreamed += steps;
    if (r.unstreamed >= spec_.protection.stream_every_tokens) {
      flush.emplace_back(&r, r.unstreamed);
      r.unstreamed = 0;
    }
  }
  if (!flush.empty()) stream(gpu, flush);
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
  replicas_->remove(r.replica, r.replica_bytes, kv_bytes(r.replicated));
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
      protected_bytes_per_token() * (r.rec.prompt_tokens + r.rec.output_tokens);
  r.replica = replicas_->pick(gpu_node, bytes, [&](int i) {
    return node_up_[i] && (i == gpu_node || fabric_.path(gpu_node, i).has_value());
  });
  if (r.replica < 0) return false;
  replicas_->book(r.replica, bytes);
  r.replica_booked = bytes;
  fit_host_tier(r.replica);  // the prefix blocks there make room
  return true;
}

void ServingModel::stream(int gpu, const std::vector<std::pair<Request*, std::int64_t>>& items) {
  const std::int64_t per_token = protected_bytes_per_token();
  if (per_token <= 0) return;
  // One flow per replica node carries every request's new KV from this GPU.
  std::map<int, std::vector<std::pair<Request*, std::int64_t>>> by_replica;
  for (const auto& item : items) by_replica[item.first->replica].push_back(item);
  const int src = node_of(gpu);
  for (auto& [replica, group] : by_replica) {
    // A local replica (the node's own host DRAM) is written over the host link.
    std::int64_t bytes = 0, descriptors = 0;
    std::vector<std::tuple<std::uint64_t, std::int64_t, std::uint32_t>> parts;
    for (auto [r, tokens] : group) {
      bytes += tokens * per_token;
      if (!methods_.engine.ideal()) descriptors += stream_descriptors(tokens);
      parts.emplace_back(r->rec.id, tokens, r->epoch);
    }
    Fabric::Done done = [this, replica = replica, per_token, parts = std::move(parts)](
                            bool delivered, const std::string&) {
      if (!delivered) return;  // the request re-streams if it still needs to
      for (auto [id, tokens, epoch] : parts) {
        result_.bytes.replica_stream += tokens * per_token;
        Request* r = find_request(id);
        if (!r || r->epoch != epoch || r->phase == Phase::kDone || r->replica != replica) {
          continue;
        }
        r->replicated += tokens;
        r->replica_bytes += tokens * per_token;
        replicas_->add(replica, tokens * per_token, kv_bytes(tokens));
      }
    };
    // The transfer engine posts the flush's descriptors first, as for any KV transfer.
    const std::int64_t setup = cost_model::engine_ns(methods_.engine, descriptors);
    if (setup > 0) {
      sim_.schedule_after(SimTime{setup},
                          [this, src, replica = replica, bytes, done = std::move(done)]() mutable {
                            send_stream(src, replica, bytes, std::move(done));
                          });
    } else {
      send_stream(src, replica, bytes, std::move(done));
    }
  }
}

void ServingModel::send_stream(int src, int replica, std::int64_t bytes, Fabric::Done done) {
  if (src == replica) {
    sim_.schedule_after(host_link_time(bytes), [this, src, done = std::move(done)] {
      done(node_up_[src], "node failed");
    });
    return;
  }
  const auto fault = path_faults_.empty() ? path_faults_.end() : path_faults_.find({src, replica});
  if (fault == path_faults_.end()) {
    fabric_.send(src, replica, bytes, std::move(done));
  } else if (fault->second == EventKind::kPathFailure || spec_.transfer_engine.stall_timeout) {
    // A failed path loses the flush; so does a stall with a timeout (the flush would time out).
    sim_.schedule_after(SimTime{}, [done] { done(false, "path fault"); });
  } else {  // a stall without a timeout: the flush waits for it to clear
    stalled_[{src, replica}].push_back(
        [this, src, replica, bytes, done] { send_stream(src, replica, bytes, done); });
  }
}

std::int64_t ServingModel::stream_descriptors(std::int64_t tokens) const {
  const ProtectedKv p = protected_kv();
  const std::int64_t kept =
      p.token_share == 1 ? tokens : std::llround(p.token_share * static_cast<double>(tokens));
  return cost_model::kv_descriptors(methods_.engine, kept, p.layers);
}

}  // namespace kvshift::sim
