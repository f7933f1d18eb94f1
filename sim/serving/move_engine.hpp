// MoveEngine: one move's life, from a booked plan to its one outcome.
//
//   start -> transferring (its own flows, a shared predictor fetch, the cached
//            prefix's loads; a hybrid's front prefill runs meanwhile)
//         -> rebuilding (its GPU jobs on the destination)
//         -> done | failed | cancelled | unfinished, reached once
//
// The engine owns the moves in flight and everything that happens to them on
// the way: path faults and stalls, node failures and drains, the transfer
// slots of a destination. It knows the rest of the serving model only through
// a MovePort of a few verbs (and the network through a Fabric), so a test can
// run a move against a fake of each. What a move's end means for its request
// (land, retry, re-plan, fall back) is the port's: move_ended().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/move_plan.hpp"
#include "cost_model/transfer_engine.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/serving/gpu_worker.hpp"
#include "sim/serving/predictor_cache.hpp"
#include "sim/serving/prefix_cache.hpp"
#include "sim/serving/results.hpp"
#include "sim/simulator.hpp"
#include "sim/spec.hpp"

namespace kvshift::sim {

/// A move the serving model planned and booked: the engine runs it from here.
struct MoveOrder {
  std::uint64_t request = 0;
  int deployment = 0;  ///< whose predictors a RISK-KV rebuild waits for
  cost_model::MovePlan plan;
  int src = -1;      ///< node the KV or token ids come from (-1: the router holds the ids)
  int src_gpu = -1;  ///< migrations and handoffs: the GPU the request leaves
  int dst_gpu = -1;
  int from_node = -1;
  std::int64_t stall_since = 0;
  /// The destination's cached prefix blocks the move pinned (plan.cached_tokens); handed to
  /// the request when it lands, given back otherwise.
  PrefixPins dst_pins;
  SimTime cached_load;           ///< until they are in from the destination's host or SSD tier
  std::size_t fetch_blocks = 0;  ///< of them, the last ones come from the storage tier
  std::int64_t ids_lead_ns = 0;  ///< hybrid: the ids' time on the wire ahead of the KV
  MoveRecord rec;                ///< filled by the planner; the engine adds what happens
};

/// How a move ended, for the serving model to act on (the record is already written).
struct MoveEnding {
  std::uint64_t request = 0;
  MoveOutcome outcome = MoveOutcome::kDone;
  std::string why;
  MoveTrigger trigger = MoveTrigger::kFailure;
  int src_gpu = -1, dst_gpu = -1, from_node = -1;
  std::int64_t stall_since = 0;
  PrefixPins dst_pins;
};

/// What the engine needs of the rest of the serving model.
class MovePort {
 public:
  virtual ~MovePort() = default;
  virtual int node_of(int gpu) const = 0;
  virtual const std::string& node_name(int node) const = 0;
  virtual bool node_up(int node) const = 0;
  virtual GpuWorker& worker(int gpu) = 0;
  /// Copies `bytes` over `gpu`'s host link after the copies before it; returns when it ends.
  virtual SimTime host_copy(int gpu, bool to_gpu, std::int64_t bytes) = 0;
  /// Bytes that stay on one node cross its host link.
  virtual SimTime host_link_time(std::int64_t bytes) const = 0;
  /// The fault on the path src -> dst now (kPathFailure, kPathStall), if any.
  virtual std::optional<EventKind> path_fault(int src, int dst) const = 0;
  /// Runs `resume` once the stall on src -> dst clears.
  virtual void when_stall_clears(int src, int dst, std::function<void()> resume) = 0;
  /// A deployment's predictor copies, and the bytes of one copy.
  virtual PredictorCache& predictors(int deployment) = 0;
  virtual std::int64_t predictor_bytes(int deployment) const = 0;
  /// The deployment a node serves; the node the predictors are fetched from.
  virtual int deployment_at(int node) const = 0;
  virtual int predictor_source() const = 0;
  /// The legs `plan` travels from `src` to `dst_node` now.
  virtual cost_model::MoveRoute route(const cost_model::MovePlan& plan, int src, int dst_node) = 0;
  /// The storage tier's node and block size (a move fetching prefix blocks from it).
  virtual int storage_node() const = 0;
  virtual std::int64_t storage_block_bytes() const = 0;
  /// The move's record, once, when it ends.
  virtual void record(const MoveRecord& rec) = 0;
  /// A transfer slot came free: waiting moves may take it.
  virtual void slot_freed() = 0;
  /// The move ended (not at the end of the run): land, retry or re-plan its request.
  virtual void move_ended(const MoveEnding& ending) = 0;
};

struct MoveEngineConfig {
  cost_model::TransferEngine engine;     ///< the transfer engine's setup costs
  int max_inflight_per_destination = 0;  ///< transfer slots per node (0: no cap)
  std::optional<Seconds> stall_timeout;  ///< a stalled transfer fails after this long
  std::size_t nodes = 0;
  std::int64_t end_ns = 0;  ///< the run's end
};

class MoveEngine {
 public:
  MoveEngine(Simulator& sim, Fabric& fabric, MovePort& port, RunResult& result,
             MoveEngineConfig config);
  ~MoveEngine();

  /// Runs a booked move (the request has none in flight).
  void start(MoveOrder order);
  /// Whether `request` is moving now.
  bool moving(std::uint64_t request) const { return moves_.count(request) > 0; }
  /// Whether a move into `node` may take one of its transfer slots now.
  bool slot_free(int node) const;

  /// Fails every move leaving or entering a GPU `gone` says is gone; returns their requests,
  /// sorted.
  std::vector<std::uint64_t> fail_touching(const std::function<bool(int gpu)>& gone,
                                           const std::string& why);
  /// Cancels every move into `node` (it started draining).
  void cancel_into(int node, const std::string& why);
  /// The path src -> dst stalled: the moves' flows on it hang (posted again whole when it
  /// clears, or failed after the stall timeout).
  void stall_path(int src, int dst);
  /// The path src -> dst failed: moves still sending over it fail.
  void fail_path(int src, int dst);
  /// At the end of the run: every move in flight is recorded unfinished; `what` is told what
  /// each request was doing.
  void close(const std::function<void(std::uint64_t request, const std::string& what)>& what);

 private:
  struct Move;
  Move* find(std::uint64_t request, std::uint64_t id);
  void launch(std::uint64_t request);
  /// Sends `kv` and `tokens` (token ids) as one flow from `src` to `dst` after `delay` (the
  /// KV's transfer-engine setup, or the leading ids' time on the wire); each kind is counted
  /// when it arrives.
  void send_part(Move& m, int src, int dst, Bytes kv, Bytes tokens, SimTime delay);
  /// One of a move's prefix loads is in; the last one queues a hybrid's front.
  void prefix_loaded(std::uint64_t request, std::uint64_t id);
  /// Queues a hybrid's front once its cached prefix and its token ids are in.
  void submit_front_if_ready(Move& m);
  /// Fetches the move's storage-tier blocks over the network, then the host link; a failed
  /// fetch fails the move.
  void fetch_prefix(Move& m);
  /// Starts a transfer's bytes, unless its path is stalled or failed.
  void start_flow(std::uint64_t request, std::uint64_t id, int src, int dst, std::int64_t bytes,
                  const Fabric::Done& done);
  /// Puts one of the move's flows in the network, tracked in its list until it arrives.
  void send_flow(Move& m, int src, int dst, std::int64_t bytes, const Fabric::Done& done);
  /// A transfer on a stalled path: it fails after the stall timeout, or (without one) waits
  /// for the stall to clear and starts again.
  void hang(std::uint64_t request, std::uint64_t id, int src, int dst, std::int64_t bytes,
            const Fabric::Done& done);
  void release_slot(Move& m);
  /// Ships the predictors of the deployment `node` serves to it.
  void begin_predictor_fetch(int node);
  void on_transfers_done(Move& m);
  /// Queues the move's GPU work once its bytes are in and a hybrid's front is done.
  void rebuild(Move& m);
  /// The one way a move ends: records it once, cancels what it still runs, then tells the
  /// port.
  void end(Move& m, MoveOutcome outcome, const std::string& why);

  Simulator& sim_;
  Fabric& fabric_;
  MovePort& port_;
  RunResult& result_;
  MoveEngineConfig config_;
  std::map<std::uint64_t, std::unique_ptr<Move>> moves_;  ///< in flight, by request
  std::vector<int> inflight_;  ///< node -> moves into it holding a transfer slot
  std::uint64_t seq_ = 0;
};

}  // namespace kvshift::sim
