// ServingModel: one simulated run of a scenario under one strategy. Requests
// arrive, are routed to a GPU with room, prefill, decode with continuous
// batching, stream their KV to a replica as configured, and are migrated
// (drain, rebalance) or recovered (node failure) with the run's strategy —
// full KV, token replay, RISK-KV, ProxyKV, or adaptive (per move, the fastest
// (strategy, destination) pair the cost model predicts, GPU work waiting for
// that GPU's queue, within the quality budget).
//
// It is wiring over small parts, each tested on its own:
//   RequestRouter   HBM bookings and the routing policy (request_router.hpp)
//   ReplicaStore    replica placement and the bytes held (replica_store.hpp)
//   ReplicaStreams  the flushes that carry new KV to replicas (replica_streams.hpp)
//   PredictorCache  which nodes hold the RISK-KV predictors (predictor_cache.hpp)
//   PrefixTiers     reusable prompt blocks: HBM, host, SSD and storage tiers
//                   (prefix_tiers.hpp, over prefix_cache.hpp)
//   HostLinks       every GPU's host link, each way (host_links.hpp)
//   GpuWorker       one GPU's compute timeline (gpu_worker.hpp)
//   MovePlan        a move's bytes, GPU work, quality and price (cost_model/move_plan.hpp)
//   MovePolicy      how the run's strategy picks each move (move_policy.hpp)
//   MoveEngine      a move's life: transferring -> rebuilding -> done | failed
//                   | cancelled | unfinished, each reached once (move_engine.hpp)
//   PathFaults, LinkSampler, RunBooks, IdWindow: faults in force, link samples,
//                   where records go, requests by id
// Planning a move and what its end means for the request stay here
// (serving_moves.cpp); the engine sees them through a port of a few verbs.
//
// Modelling choices, stated once:
// - Admission reserves a request's final KV size (prompt + output tokens, in
//   paged blocks) on its GPU, so HBM use never exceeds capacity and no
//   admitted request is preempted. Actual use grows token by token.
//   With serving.preemption, admission books the prompt (leaving a watermark
//   free), each decode pass books the blocks its batch grows into, and a pass
//   that finds no room preempts the latest arrival decoding on that GPU
//   (serving_preemption.cpp).
// - Prefix caching (when on): a prefill reuses the longest cached run of its
//   prompt's leading blocks on the GPU it was routed to (continued from the
//   node's host tier and SSD tier, loaded over the host link, then from the
//   storage tier over the network, when fetching beats prefilling) and
//   prefills the rest on top of it (ComputeCosts::extend); its blocks join that
//   GPU's cache, and are written through to the host tier, when the prefill
//   ends. Blocks in use are booked once, on the GPU; a request books its size
//   less the blocks it pins. A move to a GPU whose HBM, host or SSD tier, or the
//   storage tier, holds the request's leading blocks pins them, loads them while
//   the rest travels, and moves only the rest.
// - Replicas book their request's final protected size in the host DRAM (or
//   storage capacity) of the node holding them; a host tier keeps what is left.
//   Copies over a GPU's host link (tier loads, write-through, local replicas and
//   moves, swaps) take turns on it, each way (copy_queue.hpp); so do a node's SSD
//   reads and writes (nothing waits for a write, but reads queue behind it).
// - After a failure, a replica holds the tokens streamed so far; the tail that
//   was never streamed is recomputed on the receiver (a replay of the tail).
// - Token ids are held by the request's replica (or the router, without one)
//   and shipped from there at 4 bytes per token.
// - A migration holds its source GPU's reservation until it is done; if it
//   fails or is cancelled the request carries on at its source.
// - A move whose transfer fails (a node or link dies under it) is retried as
//   a recovery; after three attempts the request is reported failed.
// - Several deployments (spec.deployments): each request belongs to one and is
//   admitted, moved and recovered only on its pools, with its model's KV size,
//   weights, costs, methods and predictors; each one's arrivals wait in their
//   own line. The network, host DRAM, replicas and events are shared.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sim/serving/copy_queue.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/serving/gpu_worker.hpp"
#include "sim/serving/host_links.hpp"
#include "sim/serving/id_window.hpp"
#include "sim/serving/link_sampler.hpp"
#include "sim/serving/move_engine.hpp"
#include "sim/serving/move_policy.hpp"
#include "sim/serving/path_faults.hpp"
#include "sim/serving/predictor_cache.hpp"
#include "sim/serving/prefix_tiers.hpp"
#include "sim/serving/replica_store.hpp"
#include "sim/serving/replica_streams.hpp"
#include "sim/serving/request_router.hpp"
#include "sim/serving/results.hpp"
#include "sim/serving/run_books.hpp"
#include "sim/serving/serving_costs.hpp"
#include "sim/simulator.hpp"
#include "sim/spec.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {

class ServingModel final : public GpuListener {
 public:
  /// `strategy` is the one this run uses for every move. `fabric` carries all bytes.
  /// `costs` prices the first deployment's model; `pool_costs[p]`, when given, prices the GPUs
  /// of pool p (pools with their own GPU, and every pool of another deployment: run_scenario
  /// builds them); a missing or null entry uses `costs`.
  ServingModel(Simulator& sim, Fabric& fabric, const SimulationSpec& spec,
               const ServingCosts& costs, Strategy strategy, RecordOptions records = {},
               std::vector<const ServingCosts*> pool_costs = {});
  ~ServingModel() override;

  /// Schedules arrivals, events and sampling; run the simulator afterwards, then call finish().
  void start();
  /// Closes the books at the end of the run (open moves and requests become unfinished
  /// records) and returns the result.
  RunResult finish();

  // GpuListener
  void on_decoded(int gpu, std::span<const DecodeState> batch, std::int64_t steps) override;
  void on_finished(int gpu, std::uint64_t request) override;
  std::int64_t book_growth(int gpu, std::span<const DecodeState> batch, std::int64_t steps,
                           std::vector<std::uint64_t>& preempt) override;

 private:
  /// kHandingOff: prefilled on a prefill-pool GPU, waiting for its handoff to start (its
  /// ProxyKV scores, or a decode GPU with room and a free transfer slot).
  /// kPreempted: taken off its GPU for room (serving.preemption), waiting to resume;
  /// kResuming: its recompute or swap-in is under way.
  enum class Phase {
    kQueued,
    kPrefill,
    kHandingOff,
    kDecoding,
    kMoving,
    kPreempted,
    kResuming,
    kDone
  };
  struct Request;
  struct Deployment;
  struct Gpu;
  struct PendingRecovery;
  class Port;  ///< the MovePort the move engine sees (serving_model_internal.hpp)

  // Set-up (the constructor's steps).
  /// Each deployment's methods, predictor copies and pools.
  void set_up_deployments();
  /// Node `i`'s GPUs (their HBM room after the weights, their costs) and proxy GPU.
  void add_gpus(int i, std::int64_t epoch_cap);
  /// The predictor source, the replica store, the prefix tiers and preloaded predictors.
  void set_up_stores();

  // Workload, admission and prefill (serving_admission.cpp).
  void schedule_next_arrival();
  void on_arrival(const RequestArrival& a);
  void admit_pending();
  /// Where an arrival prefills: the router's pick, or (prefix-aware) the GPU with room whose
  /// first token would come soonest; -1 when none has room.
  int route_arrival(const Request& r);
  void start_prefill(Request& r, int gpu);
  /// The proxy's scoring of `r`'s prompt (of its `epoch`), beside its prefill on `gpu`, when
  /// the run needs it.
  void start_scoring(const Request& r, int gpu, std::uint32_t epoch);
  void release_gpu(Request& r);

  // Prefills that reuse cached blocks (serving_prefix.cpp); the tiers are tiers_.
  /// Fetches `blocks` storage-tier blocks of `r` for its prefill on `gpu` over the network,
  /// then the host link, and submits `job` once they and the local tiers' load (`ready`) are
  /// in; a failed fetch prefills those blocks instead.
  void fetch_then_prefill(Request& r, int gpu, std::size_t blocks, SimTime ready, GpuJob job);
  /// P/D: hands a prefilled request to a decode pool once it may go (scores, room, a slot).
  void try_handoff(Request& r);

  // Preemption (serving_preemption.cpp).
  /// Takes `r` off `gpu` (the worker drops it from its batch): its bookings are given back,
  /// its KV goes to host DRAM (swap, with room there) or is dropped (recompute), and it waits
  /// to resume. A request whose KV outgrows the GPU on its own fails instead.
  void preempt(Request& r, int gpu);
  /// Resumes the preempted requests that find room, oldest first.
  void resume_preempted();
  bool resume(Request& r);
  /// The swapped-out copy is gone or unwanted (its node failed or drains): recomputed instead.
  void drop_swap(Request& r);
  /// A resumed request rejoins decoding on `gpu`.
  void rejoin(Request& r, int gpu);
  /// Runs admit_pending from a top-level event, once, soon (callers that may not add work).
  void admit_soon();

  // Replicas (serving_replicas.cpp); their flushes are streams_.
  /// Streams the new KV of `due` (replica node, part) from `gpu` (ReplicaStreams::send).
  void stream(int gpu, std::span<std::pair<int, ReplicaStreams::Part>> due);
  /// A flush reached `replica`: its requests' replicas grow (those still streaming to it).
  void on_flushed(int replica, std::int64_t per_token, std::span<const ReplicaStreams::Part> parts);
  /// Picks and books a replica node for `r`, running on `gpu_node`. When no node has room it
  /// runs unprotected (counted once) and waits, in order, for room a dropped replica frees.
  void protect(Request& r, int gpu_node);
  bool place_replica(Request& r, int gpu_node);
  /// Forgets the request's replica (finished, failed, or the replica node is gone).
  void drop_replica(Request& r);

  // Moves (serving_moves.cpp).
  cost_model::MoveRoute route_of(const cost_model::MovePlan& plan, int src, int dst_node);
  cost_model::MoveCandidate candidate(Strategy s, const Request& r,
                                      const cost_model::MoveState& state, int src, int gpu);
  /// The run's policy's move for `r` onto one of `destinations` (else replay from the router).
  MoveChoice choose_move(const Request& r, bool from_replica, int src,
                         const std::vector<int>& destinations);
  void start_move(Request& r, MoveTrigger trigger, int from_node, std::int64_t stall_since);
  /// Books the chosen destination for `r`: the cached prefix it reuses there is pinned (and
  /// its loads from the lower tiers counted) before the rest of its room.
  MoveOrder book_destination(Request& r, const MoveChoice& c);
  /// The move's record as planned (the engine adds what happens).
  MoveRecord move_record(const Request& r, const MoveOrder& o, const MoveChoice& c,
                         MoveTrigger trigger) const;
  /// What a move's end means for its request: it lands (done), retries (failed) or is
  /// re-planned (cancelled); a failed handoff falls back to a decode-side prefill.
  void after_move(const MoveEnding& e);
  /// A handoff that did not land: it hands off elsewhere while the prefill GPU holds the KV,
  /// else falls back to a decode-side prefill from the token ids.
  void after_handoff(Request& r, const MoveEnding& e);
  /// `pins`: the destination's cached prefix blocks the move pinned.
  void land(Request& r, int dst_gpu, int src_gpu, PrefixPins pins);
  /// `r` decodes on `node` from now: a replica on the wrong side of it (local placement or
  /// not) is dropped, one is placed when it has none, and what it lacks streams again.
  void rehome_replica(Request& r, int node);
  /// At the end of the run: moves in flight and waiting recoveries become unfinished records.
  void close_moves();

  // Events.
  void schedule_events();
  void node_failure(int node, SimTime detection_delay);
  void node_repair(int node);
  /// One GPU of a node fails: its HBM is lost, the node (its host DRAM, its other GPUs, its
  /// links) stays up.
  void gpu_failure(int gpu, SimTime detection_delay);
  void gpu_repair(int gpu);
  /// The GPUs `gpus` lose their HBM: they stop, their prefix caches are gone, and moves to or
  /// from them fail (after_move takes those on). Returns the other requests that lived there.
  std::vector<std::uint64_t> fail_gpus(const std::vector<int>& gpus, const std::string& why);
  /// Recovers `lost` requests (failed on `node`) after the detection delay: one still in
  /// prefill starts over, one decoding moves from its replica (or replays).
  void recover_lost(const std::vector<std::uint64_t>& lost, int node, SimTime detection_delay);
  void drain(int node);
  void path_fault(int src, int dst, EventKind kind);
  void path_repair(int src, int dst);
  void rebalance_check();

  void fail_request(Request& r, const std::string& reason);
  /// Whether a GPU of the request's deployment is up: without one, nothing could ever serve
  /// it, and at the end of the run it counts as failed, not unfinished.
  bool can_be_served(const Request& r) const;
  int node_of(int gpu) const;
  /// The deployment a request belongs to, and the one a node's GPUs serve.
  Deployment& deployment(const Request& r);
  const Deployment& deployment(const Request& r) const;
  /// The deployment a GPU node serves (its pool's).
  Deployment& served_at(int node);
  void reserve(int gpu, const Request& r, std::int64_t bytes);
  /// Gives back all `r` books on `gpu`, its prefix-cache pins there included.
  void unreserve(int gpu, Request& r);
  /// Tells the router whether `gpu` takes new work (up, node not draining).
  void update_open(int gpu);

  Simulator& sim_;
  Fabric& fabric_;
  const SimulationSpec& spec_;
  const ServingCosts& costs_;
  std::vector<const ServingCosts*> pool_costs_;
  Strategy strategy_;
  std::unique_ptr<MovePolicy> policy_;  ///< how the strategy picks each move
  RunResult result_;
  RunBooks books_;  ///< where request and move records go
  LinkSampler link_sampler_;
  Workload workload_;
  RequestRouter router_;  ///< HBM bookings and the routing policy
  /// The models served (one unless spec.deployments names several); built once, never resized
  /// (their methods point into their specs).
  std::vector<Deployment> deployments_;
  std::vector<int> node_deployment_;   ///< node -> the deployment its GPUs serve (-1: none)
  cost_model::TransferEngine engine_;  ///< the transfer engine's costs, for every KV move

  std::vector<Gpu> gpus_;
  std::vector<std::vector<int>> node_gpus_;  ///< node -> its GPU indices
  std::vector<std::unique_ptr<GpuWorker>>
      proxy_gpus_;                      ///< node -> its proxy GPU (proxy_gpu placement)
  HostLinks links_;                     ///< every GPU's host link, each way
  std::unique_ptr<PrefixTiers> tiers_;  ///< reusable prompt blocks, HBM to storage
  std::vector<bool> node_up_, node_draining_;
  PathFaults faults_;       ///< failed and stalled paths, and the sends a stall holds
  ReplicaStreams streams_;  ///< replica flushes in flight
  std::unique_ptr<ReplicaStore> replicas_;  ///< where protected KV is kept, and how much
  /// Requests by id: every live one, and done ones not yet retired. find() is nullptr once
  /// a request is retired (done, and every earlier one too); at() is for one that cannot have
  /// been (it runs, waits or moves). In place: one pointer less per lookup.
  IdWindow<Request> requests_;
  std::set<std::uint64_t> preempted_;  ///< waiting to resume, by id (arrival order)
  std::int64_t swapped_bytes_ = 0;     ///< held in host DRAM by swapped-out requests
  std::deque<PendingRecovery> pending_recoveries_;
  std::deque<std::uint64_t> unprotected_;  ///< waiting for replica room, oldest first
  /// P/D: prefilled requests waiting for a decode GPU with room (id, epoch).
  std::deque<std::pair<std::uint64_t, std::uint32_t>> pending_handoffs_;
  bool admit_scheduled_ = false;  ///< an admit_pending() event is on its way
  std::unique_ptr<Port> port_;
  std::unique_ptr<MoveEngine> move_engine_;  ///< the moves in flight, by request
  std::vector<std::pair<int, ReplicaStreams::Part>> due_flushes_;  ///< on_decoded's scratch
  int storage_node_ = -1;
  int predictor_source_ = -1;
  std::int64_t end_ns_ = 0;
  std::optional<RequestArrival> next_arrival_;  ///< the one arrival scheduled
};

}  // namespace kvshift::sim
