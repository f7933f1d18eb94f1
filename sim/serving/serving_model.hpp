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
//   PredictorCache  which nodes hold the RISK-KV predictors (predictor_cache.hpp)
//   PrefixCache     one GPU's reusable prompt blocks (prefix_cache.hpp)
//   GpuWorker       one GPU's compute timeline (gpu_worker.hpp)
//   MovePlan        a move's bytes, GPU work, quality and price (cost_model/move_plan.hpp)
//   MovePolicy      how the run's strategy picks each move (move_policy.hpp)
//   MoveEngine      a move's life: transferring -> rebuilding -> done | failed
//                   | cancelled | unfinished, each reached once (move_engine.hpp)
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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sim/serving/copy_queue.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/serving/gpu_worker.hpp"
#include "sim/serving/move_engine.hpp"
#include "sim/serving/move_policy.hpp"
#include "sim/serving/predictor_cache.hpp"
#include "sim/serving/prefix_cache.hpp"
#include "sim/serving/replica_store.hpp"
#include "sim/serving/request_router.hpp"
#include "sim/serving/results.hpp"
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
  /// Node `i`'s GPUs (their HBM room after the weights), prefix tiers and proxy GPU.
  void add_gpus(int i, std::int64_t epoch_cap);
  /// The storage tier, the predictor source, the replica store and preloaded predictors.
  void set_up_stores();
  /// Builds the port and the move engine (after end_ns_ is known).
  void make_move_engine();

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

  // Prefix caching (serving_prefix.cpp).
  /// The keys of the arrival's cacheable leading blocks: whole blocks, and never the whole
  /// prompt (its last token is always prefilled, for the first output token).
  std::vector<std::uint64_t> prefix_keys(const RequestArrival& a) const;
  /// At the start of a prefill on `gpu`: pins the cached run of the prompt's leading blocks
  /// (in HBM, then continued from the node's host tier, its SSD tier, then the storage tier)
  /// and returns its tokens (0 without a cache or a hit), counting the lookup; `load` is how
  /// long the blocks from the node's lower tiers take to reach HBM, and `fetch` how many
  /// blocks (the run's last) the prefill must fetch from the storage tier first.
  std::int64_t reuse_prefix(Request& r, int gpu, SimTime& load, std::size_t& fetch);
  /// The cached run of `r`'s leading blocks for `gpu`: in its HBM, then continued in its
  /// node's host tier, then in its SSD tier, and how long the lower tiers' blocks take to
  /// reach HBM: the SSD's read into host DRAM, then the host link for both.
  /// The run goes on into the storage tier (estimated over the network path's share now, then
  /// the host link) when fetching beats prefilling those blocks.
  struct PrefixRun {
    std::size_t in_hbm = 0, from_host = 0, from_ssd = 0, from_storage = 0;
    SimTime load;
    std::size_t local() const { return in_hbm + from_host + from_ssd; }  ///< on the node
    std::size_t blocks() const { return local() + from_storage; }
  };
  PrefixRun prefix_run(const Request& r, int gpu) const;
  /// Pins the request's keys [r.pinned, blocks) in `gpu`'s cache; returns those inserted.
  std::size_t pin_prefix(Request& r, int gpu, std::size_t blocks);
  /// Pins `keys` in `gpu`'s cache (inserting the missing ones; returns how many), and gives
  /// pins of cache generation `generation` back (none when that cache was lost since);
  /// the router books the cache's pinned bytes either way.
  std::size_t pin_blocks(int gpu, std::span<const std::uint64_t> keys);
  void unpin_blocks(int gpu, std::span<const std::uint64_t> keys, std::uint64_t generation);
  /// Leading blocks of a request pinned in one GPU's cache, of that cache's generation.
  using Pins = PrefixPins;
  /// The prefill on `gpu` ended: the prompt's blocks join its cache, booked there once
  /// instead of by the request (which booked `booked` bytes with its pins).
  void cache_prompt(Request& r, int gpu, std::int64_t booked);
  /// Bytes of the blocks `r` pins.
  std::int64_t pinned_bytes(const Request& r) const;
  /// Gives back the request's pins (none after its cache was lost to a failure).
  void unpin_prefix(Request& r);
  /// Evicts unpinned blocks until `gpu`'s bookings and its unpinned blocks fit in HBM.
  void fit_cache(int gpu);
  /// Evicts host-tier blocks of `node` until they fit beside its replicas in host DRAM; with
  /// an SSD tier, the evicted blocks are written to it.
  void fit_host_tier(int node);
  void count_host_tier(std::int64_t delta_bytes);
  /// Writes blocks the host tier of `node` evicted to its SSD tier, evicting the SSD's least
  /// recently used blocks beyond its capacity.
  void spill_to_ssd(int node, std::span<const std::uint64_t> keys);
  /// Sends blocks the lowest tier of `node` evicted to the storage tier (over the network;
  /// nothing waits for it), evicting its least recently used blocks beyond its room.
  void spill_to_storage(int node, std::span<const std::uint64_t> keys);
  /// Evicts storage-tier blocks until they fit beside the replicas on the storage node.
  void fit_storage_tier();
  /// Fetches `blocks` storage-tier blocks of `r` for its prefill on `gpu` over the network,
  /// then the host link, and submits `job` once they and the local tiers' load (`ready`) are
  /// in; a failed fetch prefills those blocks instead.
  void fetch_then_prefill(Request& r, int gpu, std::size_t blocks, SimTime ready, GpuJob job);
  /// P/D: hands a prefilled request to a decode pool once it may go (scores, room, a slot).
  void try_handoff(Request& r);
  bool on_prefill_pool(int gpu) const;
  const ServingCosts& costs_of(int node) const;

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

  // Replica streaming.
  /// Streams `tokens` new tokens of each request to its replica: one flush per replica
  /// node, in replica order. Reorders `items`.
  void stream(int gpu, std::span<std::pair<Request*, std::int64_t>> items);
  /// A flush that landed: its requests' replicas grow (those still streaming to it).
  void on_flushed(std::uint32_t flush, bool delivered);
  /// Picks and books a replica node for `r`, running on `gpu_node`. When no node has room it
  /// runs unprotected (counted once) and waits, in order, for room a dropped replica frees.
  void protect(Request& r, int gpu_node);
  bool place_replica(Request& r, int gpu_node);
  /// Sends a replica flush unless its path is failed (lost) or stalled (lost after a timeout,
  /// else held until the stall clears).
  void send_stream(int gpu, int replica, std::int64_t bytes, Fabric::Done done);
  /// Transfer-engine descriptors of streaming `tokens` tokens of protected KV.
  std::int64_t stream_descriptors(int deployment, std::int64_t tokens) const;
  /// Forgets the request's replica (finished, failed, or the replica node is gone).
  void drop_replica(Request& r);

  // Moves (serving_moves.cpp).
  cost_model::SourceKv source_kv(const Request& r, bool from_replica, int src) const;
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
  /// Whether a move into `node` may take one of its transfer slots now.
  bool slot_free(int node) const { return move_engine_->slot_free(node); }
  /// Bytes that stay on one node cross its host link (the estimator's local leg).
  SimTime host_link_time(std::int64_t bytes) const;
  /// Copies `bytes` over `gpu`'s host link, towards the GPU or from it, once `ready` (and the
  /// copies asked for before it) allow; returns when it ends.
  SimTime host_copy(int gpu, bool to_gpu, std::int64_t bytes, SimTime ready = {});
  /// Reading `bytes` of prefix blocks from a node's SSD tier into its host DRAM, or writing
  /// them from host DRAM to it.
  SimTime ssd_time(std::int64_t bytes, bool write) const;
  /// What a move's end means for its request: it lands (done), retries (failed) or is
  /// re-planned (cancelled); a failed handoff falls back to a decode-side prefill.
  void after_move(const MoveEnding& e);
  /// A handoff that did not land: it hands off elsewhere while the prefill GPU holds the KV,
  /// else falls back to a decode-side prefill from the token ids.
  void after_handoff(Request& r, const MoveEnding& e);
  /// `pins`: the destination's cached prefix blocks the move pinned.
  void land(Request& r, int dst_gpu, int src_gpu, Pins pins);
  /// `r` decodes on `node` from now: a replica on the wrong side of it (local placement or
  /// not) is dropped, one is placed when it has none, and what it lacks streams again.
  void rehome_replica(Request& r, int node);
  /// The cached run of `r`'s leading blocks a move to `gpu` need not ship or rebuild: in its
  /// HBM, then in its node's host and SSD tiers and the storage tier (loaded while the move's
  /// bytes travel).
  PrefixRun cached_at(const Request& r, int gpu) const;
  /// The first `blocks` of `run` are taken for `r` on `gpu`: those past its HBM are read from
  /// the node's host and SSD tiers (touched, and counted as a prefill's hit or a move's load),
  /// the SSD's into host DRAM, then all over the GPU's host link. Returns how long from now
  /// until they are in HBM.
  SimTime read_tiers(const Request& r, int gpu, const PrefixRun& run, std::size_t blocks,
                     bool for_move);
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
  void sample_links();

  void fail_request(Request& r, const std::string& reason);
  /// nullptr once the request is retired (done, and every earlier request too).
  Request* find_request(std::uint64_t id);
  /// A request that cannot have been retired (it runs, waits or moves).
  Request& request(std::uint64_t id);  // inline, in serving_model_internal.hpp
  /// Records and frees the done requests at the front of requests_ (id order). Called only
  /// from top-level events (arrivals), never while a caller holds a Request&.
  void retire_done();
  void record(const RequestRecord& r);
  void record(const MoveRecord& m);
  /// What a request still running at the end was doing.
  std::string unfinished_reason(const Request& r) const;
  /// Whether a GPU of the request's deployment is up: without one, nothing could ever serve
  /// it, and at the end of the run it counts as failed, not unfinished.
  bool can_be_served(const Request& r) const;
  /// KV bytes of `tokens` of deployment `d`'s model.
  std::int64_t kv_bytes(int d, std::int64_t tokens) const;
  /// KV bytes of `tokens` rounded up to whole paged blocks (what admission books).
  std::int64_t block_bytes(int d, std::int64_t tokens) const;
  /// What a replica keeps of each token's KV: these layers, this share of the tokens.
  struct ProtectedKv {
    int layers = 0;
    double token_share = 1;
  };
  ProtectedKv protected_kv(int d) const;
  std::int64_t protected_bytes_per_token(int d) const;
  int node_of(int gpu) const;
  /// The deployment a request belongs to, and the one a node's GPUs serve.
  Deployment& deployment(const Request& r);
  const Deployment& deployment(const Request& r) const;
  /// The deployment a GPU node serves (its pool's).
  Deployment& served_at(int node);
  void reserve(int gpu, const Request& r, std::int64_t bytes);
  void reserve(int gpu, const Request& r);  ///< its final KV size
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
  RecordOptions records_;
  RunResult result_;
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
      proxy_gpus_;  ///< node -> its proxy GPU (proxy_gpu placement)
  /// node -> its host-DRAM prefix tier (null unless serving.prefix_cache.host_offload)
  std::vector<std::unique_ptr<PrefixCache>> host_tiers_;
  std::int64_t host_tier_bytes_ = 0;  ///< held by every host tier
  /// node -> its SSD prefix tier (null unless serving.prefix_cache.ssd_tier)
  std::vector<std::unique_ptr<PrefixCache>> ssd_tiers_;
  std::int64_t ssd_tier_bytes_ = 0;  ///< held by every SSD tier
  std::vector<CopyQueue> ssd_io_;    ///< node -> its SSD: reads and writes take turns
  /// The storage tier (serving.prefix_cache.storage_tier), its node and the bytes it holds.
  std::unique_ptr<PrefixCache> storage_tier_;
  int storage_tier_node_ = -1;
  std::int64_t storage_tier_bytes_ = 0;
  std::vector<bool> node_up_, node_draining_;
  std::unique_ptr<ReplicaStore> replicas_;  ///< where protected KV is kept, and how much
  /// Requests from first_live_ on, by id: every live one, and done ones not yet retired.
  std::deque<Request> requests_;  ///< in place: one pointer less per lookup
  std::uint64_t first_live_ = 0;
  std::set<std::uint64_t> preempted_;  ///< waiting to resume, by id (arrival order)
  std::int64_t swapped_bytes_ = 0;     ///< held in host DRAM by swapped-out requests
  std::deque<PendingRecovery> pending_recoveries_;
  std::deque<std::uint64_t> unprotected_;  ///< waiting for replica room, oldest first
  /// P/D: prefilled requests waiting for a decode GPU with room (id, epoch).
  std::deque<std::pair<std::uint64_t, std::uint32_t>> pending_handoffs_;
  bool admit_scheduled_ = false;  ///< an admit_pending() event is on its way
  /// Active path faults (src, dst) -> kind, and transfers hung on a stall without a timeout.
  std::map<std::pair<int, int>, EventKind> path_faults_;
  std::map<std::pair<int, int>, std::vector<std::function<void()>>> stalled_;
  std::unique_ptr<Port> port_;
  std::unique_ptr<MoveEngine> move_engine_;    ///< the moves in flight, by request
  std::vector<std::int64_t> last_link_bytes_;  ///< per link direction, at the last sample
  /// Replica flushes in flight, by slot (a Done then names only its slot and fits
  /// std::function's inline buffer; slots are reused, so streaming allocates nothing).
  struct StreamFlush {
    int replica = -1;
    std::int64_t per_token = 0;  ///< protected bytes per token
    struct Part {
      std::uint64_t request;
      std::int64_t tokens;
      std::uint32_t epoch;
    };
    std::vector<Part> parts;
  };
  std::vector<StreamFlush> flushes_;
  std::vector<std::uint32_t> free_flushes_;
  std::vector<std::pair<Request*, std::int64_t>> due_flushes_;  ///< on_decoded's scratch
  int storage_node_ = -1;
  int predictor_source_ = -1;
  std::int64_t end_ns_ = 0;
  std::optional<RequestArrival> next_arrival_;  ///< the one arrival scheduled
};

}  // namespace kvshift::sim
