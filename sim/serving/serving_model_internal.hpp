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
  /// Prefix caching: the keys of its prompt's cacheable leading blocks, and the first
  /// `pinned` of them it pins in `pin_gpu`'s cache (of that cache's generation).
  std::vector<std::uint64_t> prefix_keys;
  std::size_t pinned = 0;
  int pin_gpu = -1;
  std::uint64_t pin_generation = 0;
  /// Preempted with swap: the node whose host DRAM holds its KV (-1: none), the bytes, and
  /// when the copy out ends.
  int swap_node = -1;
  std::int64_t swap_bytes = 0;
  std::int64_t swap_ready_ns = 0;
};

/// The serving model numbers nodes with int (-1: none); the fabric takes a real one.
inline NodeId node_id(int node) { return static_cast<NodeId>(node); }

inline ServingModel::Request& ServingModel::request(std::uint64_t id) {
  return requests_[id - first_live_];
}

/// One model the run serves (DeploymentSpec) and what it alone holds.
struct ServingModel::Deployment {
  DeploymentSpec spec;
  cost_model::MoveMethods methods;             ///< for its move plans; points into spec
  std::int64_t predictor_bytes = 0;            ///< one set of its RISK-KV predictors
  std::unique_ptr<PredictorCache> predictors;  ///< which nodes hold them
  PoolSet arrival_pools = kAllPools;           ///< where its arrivals prefill
  PoolSet decode_pools = kAllPools;            ///< where its requests decode (handoffs, moves)
  std::deque<std::uint64_t> pending;           ///< its arrivals waiting for a GPU with room
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
  std::unique_ptr<PrefixCache> cache;  ///< null unless serving.prefix_cache is on
  int node = 0;
  CopyQueue to_gpu, from_gpu;  ///< its host link, each way
};

/// A move is an activity: planned -> transferring -> rebuilding -> one terminal outcome
/// (done, failed, cancelled, unfinished at the end), reached once, through end_move().
/// It owns its transfers and GPU jobs: ending it cancels what is still running.
struct ServingModel::Move {
  enum class Stage { kTransferring, kRebuilding };
  std::uint64_t id = 0;  ///< unique within the run; callbacks carry it, not a pointer
  Request* r = nullptr;
  Stage stage = Stage::kTransferring;
  cost_model::MovePlan plan;
  MoveRecord rec;
  int src = -1;      ///< node the KV or token ids come from (-1: the router holds the ids)
  int src_gpu = -1;  ///< migrations: the GPU the request leaves; reserved until the move ends
  int dst_gpu = -1;
  int from_node = -1;
  int transfers_left = 0;
  bool awaiting_predictor = false;
  bool in_slot = false;  ///< holds a transfer slot of its destination node
  int jobs_left = 0;
  bool front_running = false;  ///< hybrid: the receiver is still prefilling the front
  bool bytes_in = false;       ///< every transfer (and the predictor) has arrived
  std::int64_t stall_since = 0;
  std::int64_t gpu_ready_ns = 0;  ///< since when the move waits for its next GPU job
  /// The destination's cached prefix blocks the move pins (plan.cached_tokens); handed to
  /// the request when it lands, given back otherwise.
  Pins dst_pins;
  SimTime cached_load;           ///< until they are in from the destination's host or SSD tier
  std::size_t fetch_blocks = 0;  ///< of them, the last ones come from the storage tier
  int prefix_loads = 0;          ///< the prefix's loads not yet in (local tiers, storage)
  bool ids_pending = false;      ///< hybrid: the front's token ids are still on their way
  std::int64_t ids_lead_ns = 0;  ///< hybrid: the ids' time on the wire ahead of the KV
  std::optional<GpuJob> front;   ///< hybrid: its front, queued once the prefix and ids are in
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
