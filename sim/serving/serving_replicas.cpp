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
    Request& r = *requests_[s.request];
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
  Request& r = *requests_[id];
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
  replica_held_[r.replica] -= r.replica_bytes;
  replica_total_ -= r.replica_bytes;
  replica_full_equiv_ -= kv_bytes(r.replicated);
  r.replica_bytes = 0;
  r.replicated = 0;
  r.replica = -1;
}

int ServingModel::pick_replica(int gpu_node) {
  const int n = static_cast<int>(spec_.cluster.nodes.size());
  auto usable = [&](int i) {
    return i != gpu_node && node_up_[i] && spec_.cluster.nodes[i].kind != NodeKind::kSwitch &&
           fabric_.path(gpu_node, i).has_value();
  };
  switch (spec_.protection.placement) {
    case ReplicaPlacement::kStorage:
      return storage_node_ >= 0 && usable(storage_node_) ? storage_node_ : -1;
    case ReplicaPlacement::kNextNode:
      for (int k = 1; k < n; ++k) {
        const int i = (gpu_node + k) % n;
        if (spec_.cluster.nodes[i].kind == NodeKind::kGpu && usable(i)) return i;
      }
      return -1;
    case ReplicaPlacement::kLeastLoaded: {
      int best = -1;
      for (int i = 0; i < n; ++i) {
        if (usable(i) && (best < 0 || replica_held_[i] < replica_held_[best])) best = i;
      }
      return best;
    }
  }
  return -1;
}

void ServingModel::stream(int gpu, const std::vector<std::pair<Request*, std::int64_t>>& items) {
  const std::int64_t per_token = protected_bytes_per_token();
  if (per_token <= 0) return;
  // One flow per replica node carries every request's new KV from this GPU.
  std::map<int, std::vector<std::pair<Request*, std::int64_t>>> by_replica;
  for (const auto& item : items) by_replica[item.first->replica].push_back(item);
  const int src = node_of(gpu);
  for (auto& [replica, group] : by_replica) {
    std::int64_t bytes = 0;
    std::vector<std::tuple<Request*, std::int64_t, std::uint32_t>> parts;
    for (auto [r, tokens] : group) {
      bytes += tokens * per_token;
      parts.emplace_back(r, tokens, r->epoch);
    }
    fabric_.send(src, replica, bytes,
                 [this, replica = replica, per_token, parts = std::move(parts)](
                     bool delivered, const std::string&) {
                   if (!delivered) return;  // the request re-streams if it still needs to
                   for (auto [r, tokens, epoch] : parts) {
                     result_.bytes.replica_stream += tokens * per_token;
                     if (r->epoch != epoch || r->phase == Phase::kDone || r->replica != replica) {
                       continue;
                     }
                     r->replicated += tokens;
                     r->replica_bytes += tokens * per_token;
                     replica_held_[replica] += tokens * per_token;
                     replica_total_ += tokens * per_token;
                     replica_full_equiv_ += kv_bytes(tokens);
                   }
                   if (replica_total_ > result_.replica_bytes_held_peak) {
                     result_.replica_bytes_held_peak = replica_total_;
                     result_.replica_bytes_full_equiv = replica_full_equiv_;
                   }
                 });
  }
}

}  // namespace kvshift::sim
