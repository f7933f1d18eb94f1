// ServingModel: one simulated run of a scenario under one strategy. Requests
// arrive, are routed to a GPU with room, prefill, decode with continuous
// batching, stream their KV to a replica as configured, and are migrated
// (drain, rebalance) or recovered (node failure) with the run's strategy —
// full KV, token replay, RISK-KV, ProxyKV, or adaptive (per move, the fastest
// the cost model predicts for the current path and receiving-GPU backlog,
// among the strategies the protection mode and the quality budget allow).
//
// Modelling choices, stated once:
// - Admission reserves a request's final KV size (prompt + output tokens, in
//   paged blocks) on its GPU, so HBM use never exceeds capacity and no
//   admitted request is preempted. Actual use grows token by token.
// - After a failure, a replica holds the tokens streamed so far; the tail that
//   was never streamed is recomputed on the receiver (a replay of the tail).
// - Token ids are held by the request's replica (or the router, without one)
//   and shipped from there at 4 bytes per token.
// - A move whose transfer fails (a node or link dies under it) is retried as
//   a recovery; after three attempts the request is reported failed.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/serving/fabric.hpp"
#include "sim/serving/gpu_worker.hpp"
#include "sim/serving/results.hpp"
#include "sim/serving/serving_costs.hpp"
#include "sim/simulator.hpp"
#include "sim/spec.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {

class ServingModel final : public GpuListener {
 public:
  /// `strategy` is the one this run uses for every move. `fabric` carries all bytes.
  ServingModel(Simulator& sim, Fabric& fabric, const ScenarioSpec& spec, const ServingCosts& costs,
               Strategy strategy, bool record_trace);
  ~ServingModel() override;

  /// Schedules arrivals, events and sampling; run the simulator afterwards, then call finish().
  void start();
  /// Closes the books at the end of the run and returns the records.
  RunResult finish();

  // GpuListener
  void on_decoded(int gpu, const std::vector<DecodeState>& batch, std::int64_t steps) override;
  void on_finished(int gpu, std::uint64_t request) override;

 private:
  enum class Phase { kQueued, kPrefill, kDecoding, kMoving, kDone };
  struct Request;
  struct Gpu;
  struct Move;

  // Workload and admission.
  void schedule_next_arrival();
  void on_arrival(const RequestArrival& a);
  int route(std::int64_t reserve_bytes, int exclude_node);
  void admit_pending();
  void start_prefill(Request& r, int gpu);
  void release_gpu(Request& r);

  // Replica streaming.
  void stream(int gpu, const std::vector<std::pair<Request*, std::int64_t>>& items);
  int pick_replica(int gpu_node);
  /// Forgets the request's replica (finished, failed, or the replica node is gone).
  void drop_replica(Request& r);

  // Moves.
  void start_move(Request& r, MoveTrigger trigger, int from_node, std::int64_t stall_since);
  Strategy choose(const Request& r, bool from_replica, int src, int dst_gpu, std::string* note);
  bool feasible(Strategy s, bool from_replica) const;
  double predict_s(Strategy s, const Request& r, int src, int dst_gpu);
  void transfer_part(Move& m, int src, int dst, std::int64_t bytes, std::int64_t BytesByKind::*kind);
  void on_transfers_done(Move& m);
  void finish_move(Move& m);
  void fail_move(Move& m, const std::string& reason);

  // Events.
  void schedule_events();
  void node_failure(int node, SimTime detection_delay);
  void node_repair(int node);
  void drain(int node);
  void rebalance_check();
  void sample_links();

  void fail_request(Request& r, const std::string& reason);
  std::int64_t kv_bytes(std::int64_t tokens) const;
  std::int64_t protected_bytes_per_token() const;
  double strategy_delta_nll(Strategy s) const;
  int node_of(int gpu) const;
  void reserve(Gpu& g, const Request& r);
  void unreserve(Gpu& g, const Request& r);
  void set_load(Gpu& g, std::int64_t reserved);

  Simulator& sim_;
  Fabric& fabric_;
  const ScenarioSpec& spec_;
  const ServingCosts& costs_;
  Strategy strategy_;
  RunResult result_;
  Workload workload_;
  Rng router_rng_;

  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::set<std::pair<double, int>> by_load_;       ///< router index: (reserved share, GPU)
  std::vector<std::vector<int>> node_gpus_;        ///< node -> its GPU indices
  std::vector<std::unique_ptr<GpuWorker>> proxy_gpus_;  ///< node -> its proxy GPU (proxy_gpu placement)
  std::vector<bool> node_up_, node_draining_;
  std::vector<std::int64_t> replica_held_;         ///< node -> KV bytes held for others
  std::vector<std::int64_t> predictor_cached_;     ///< node -> predictor bytes resident (0: none)
  std::vector<std::unique_ptr<Request>> requests_;  ///< by id
  std::deque<std::uint64_t> pending_;              ///< waiting for a GPU with room
  std::deque<std::pair<std::uint64_t, std::int64_t>> pending_recoveries_;  ///< (request, stall since)
  std::map<std::uint64_t, std::unique_ptr<Move>> moves_;  ///< in flight, by request
  std::vector<LinkCounter> last_counters_;
  std::int64_t replica_total_ = 0, replica_full_equiv_ = 0;
  std::size_t round_robin_ = 0;
  int storage_node_ = -1;
  int predictor_source_ = -1;
  std::int64_t predictor_bytes_ = 0;
  std::int64_t end_ns_ = 0;
};

}  // namespace kvshift::sim
