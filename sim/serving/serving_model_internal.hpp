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

struct ServingModel::Request {
  RequestRecord rec;
  Phase phase = Phase::kQueued;
  int gpu = -1;
  std::int64_t context = 0;    ///< KV tokens held
  std::int64_t remaining = 0;  ///< output tokens still to produce
  std::int64_t reserved = 0;   ///< KV bytes reserved on its GPU
  int replica = -1;            ///< node holding its protected KV, -1 = none
  std::int64_t replicated = 0;  ///< tokens safely on the replica
  std::int64_t unstreamed = 0;  ///< tokens produced since the last stream
  std::int64_t replica_bytes = 0;
  std::uint32_t epoch = 0;     ///< bumps whenever the request loses its state
  int attempts = 0;
  bool scored = false;         ///< ProxyKV scores computed
};

struct ServingModel::Gpu {
  std::unique_ptr<GpuWorker> worker;
  int node = 0;
  std::int64_t capacity = 0;
  std::int64_t reserved = 0;
  std::set<std::uint64_t> members;  ///< requests that hold a reservation here
};

struct ServingModel::Move {
  Request* r = nullptr;
  MoveRecord rec;
  Strategy strategy = Strategy::kTokenReplay;
  std::uint32_t epoch = 0;
  int src_gpu = -1;  ///< migrations: the GPU the request leaves
  int dst_gpu = -1;
  int parts = 0;     ///< transfers still in flight
  int jobs = 0;      ///< GPU jobs still to finish
  std::int64_t available = 0;  ///< tokens whose KV (or ids) arrive
  std::int64_t tail = 0;       ///< tokens recomputed on the receiver
  std::int64_t stall_since = 0;
  std::int64_t transfers_done_ns = 0;
  std::vector<std::uint64_t> transfers;
};


namespace serving_detail {

inline constexpr int kMaxMoveAttempts = 3;
inline constexpr std::int64_t kTokenIdBytes = 4;

inline bool lossy(Strategy s) { return s == Strategy::kRiskKv || s == Strategy::kProxyKv; }

}  // namespace serving_detail

}  // namespace kvshift::sim
