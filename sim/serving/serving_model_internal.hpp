// Private state of ServingModel, shared by the files that implement it
// (serving_model.cpp, serving_replicas.cpp, serving_moves.cpp,
// serving_events.cpp). Not part of the public interface.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sim/serving/serving_model.hpp"

namespace kvshift::sim {

struct alignas(64) ServingModel::Request {
  // What a decode epoch and a replica flush read and write come first, in one cache line:
  // a fleet run touches a request per epoch, long after it last did.
  std::int64_t context = 0;     ///< KV tokens held
  std::int64_t remaining = 0;   ///< output tokens still to produce
  std::int64_t unstreamed = 0;  ///< tokens produced since the last stream
  std::int64_t replicated = 0;  ///< tokens safely on the replica
  std::int64_t replica_bytes = 0;
  int replica = -1;         ///< node holding its protected KV, -1 = none
  std::uint32_t epoch = 0;  ///< bumps whenever the request loses its state
  Phase phase = Phase::kQueued;
  int gpu = -1;  ///< where it runs (during a migration: the GPU it leaves)
  RequestRecord rec;
  /// KV bytes it books on its GPU: its final size (a prefill GPU books the prompt); with
  /// preemption, the blocks booked so far (they grow as it decodes).
  std::int64_t reserved = 0;
  std::int64_t replica_booked = 0;  ///< room its replica books there (its final size)
  bool waited_for_replica = false;  ///< once found no node with room for its replica
  int attempts = 0;
  std::int64_t handoff_since = 0;  ///< P/D: when its prefill ended
  bool scored = false;             ///< ProxyKV scores computed
  PrefixHold prefix;               ///< its prompt's cacheable blocks, and those it pins
  /// Preempted with swap: the node whose host DRAM holds its KV (-1: none), the bytes, and
  /// when the copy out ends.
  int swap_node = -1;
  std::int64_t swap_bytes = 0;
  std::int64_t swap_ready_ns = 0;

  /// What it was doing when the run ended unfinished.
  std::string unfinished_reason() const;
};

/// The serving model numbers nodes with int (-1: none); the fabric takes a real one.
inline NodeId node_id(int node) { return static_cast<NodeId>(node); }

/// One model the run serves (DeploymentSpec) and what it alone holds.
struct ServingModel::Deployment {
  DeploymentSpec spec;
  cost_model::MoveMethods methods;             ///< for its move plans; points into spec
  std::int64_t predictor_bytes = 0;            ///< one set of its RISK-KV predictors
  std::unique_ptr<PredictorCache> predictors;  ///< which nodes hold them
  PoolSet arrival_pools = kAllPools;           ///< where its arrivals prefill
  PoolSet decode_pools = kAllPools;            ///< where its requests decode (handoffs, moves)
  std::deque<std::uint64_t> pending;           ///< its arrivals waiting for a GPU with room
  std::int64_t kv_block_tokens = 1;            ///< paged KV block (serving.kv_block_tokens)
  ReplicaStreams::Kept protected_kv;  ///< what its replicas keep of each token (protection)
  cost_model::SourceKv replica_kv = cost_model::SourceKv::kNone;  ///< what a recovery reads

  /// Sets protected_kv and replica_kv for protection `mode`.
  void protect_with(ProtectionMode mode);
  /// KV bytes of `tokens` of its model.
  std::int64_t kv_bytes(std::int64_t tokens) const {
    return cost_model::kv_bytes(spec.model, tokens).count;
  }
  /// KV bytes of `tokens` rounded up to whole paged blocks (what admission books).
  std::int64_t block_bytes(std::int64_t tokens) const {
    return kv_bytes((tokens + kv_block_tokens - 1) / kv_block_tokens * kv_block_tokens);
  }
};

inline ServingModel::Deployment& ServingModel::deployment(const Request& r) {
  return deployments_[static_cast<std::size_t>(r.rec.deployment)];
}

inline const ServingModel::Deployment& ServingModel::deployment(const Request& r) const {
  return deployments_[static_cast<std::size_t>(r.rec.deployment)];
}

inline ServingModel::Deployment& ServingModel::served_at(int node) {
  return deployments_[static_cast<std::size_t>(node_deployment_[static_cast<std::size_t>(node)])];
}

/// A GPU's compute timeline and node; its HBM bookings are the router's.
struct ServingModel::Gpu {
  std::unique_ptr<GpuWorker> worker;
  int node = 0;
  const ServingCosts* costs = nullptr;  ///< its pool's model and GPU
  bool prefill_only = false;            ///< in a prefill pool (P/D): it hands requests off
};

/// The serving model as the move engine sees it.
class ServingModel::Port final : public MovePort {
 public:
  explicit Port(ServingModel& m) : m_(m) {}
  int node_of(int gpu) const override { return m_.node_of(gpu); }
  const std::string& node_name(int node) const override {
    return m_.spec_.cluster.nodes[static_cast<std::size_t>(node)].name;
  }
  bool node_up(int node) const override { return m_.node_up_[static_cast<std::size_t>(node)]; }
  GpuWorker& worker(int gpu) override { return *m_.gpus_[static_cast<std::size_t>(gpu)].worker; }
  SimTime host_copy(int gpu, bool to_gpu, std::int64_t bytes) override {
    return m_.links_.copy(gpu, to_gpu, bytes);
  }
  SimTime host_link_time(std::int64_t bytes) const override { return m_.links_.time(bytes); }
  std::optional<EventKind> path_fault(int src, int dst) const override {
    return m_.faults_.at(src, dst);
  }
  void when_stall_clears(int src, int dst, std::function<void()> resume) override {
    m_.faults_.when_clears(src, dst, std::move(resume));
  }
  PredictorCache& predictors(int deployment) override {
    return *m_.deployments_[static_cast<std::size_t>(deployment)].predictors;
  }
  std::int64_t predictor_bytes(int deployment) const override {
    return m_.deployments_[static_cast<std::size_t>(deployment)].predictor_bytes;
  }
  int deployment_at(int node) const override {
    return m_.node_deployment_[static_cast<std::size_t>(node)];
  }
  int predictor_source() const override { return m_.predictor_source_; }
  cost_model::MoveRoute route(const cost_model::MovePlan& plan, int src, int dst_node) override {
    return m_.route_of(plan, src, dst_node);
  }
  int storage_node() const override { return m_.tiers_->storage_node(); }
  std::int64_t storage_block_bytes() const override { return m_.tiers_->storage_block_bytes(); }
  void record(const MoveRecord& rec) override { m_.books_.add(rec); }
  void slot_freed() override { m_.admit_soon(); }  // waiting handoffs and recoveries may take it
  void move_ended(const MoveEnding& ending) override { m_.after_move(ending); }

 private:
  ServingModel& m_;
};

/// A recovery that found no GPU with room: it waits, and counts as unfinished at the end.
struct ServingModel::PendingRecovery {
  std::uint64_t request = 0;
  int from_node = -1;
  std::int64_t stall_since = 0;
  std::int64_t since = 0;  ///< when it was detected
};

namespace serving_detail {

inline constexpr int kMaxMoveAttempts = 3;
/// Destinations a move considers (the router's best few, one per node).
inline constexpr std::size_t kMoveDestinations = 4;

}  // namespace serving_detail

}  // namespace kvshift::sim
