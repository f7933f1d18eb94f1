// MovePlan: what one way of moving or rebuilding a request's KV ships and
// computes (ARCHITECTURE.md, "Moves: plan, estimate, execute"). Three pure functions
// carry every strategy's arithmetic, once:
//   plan_move      strategy + request state -> bytes by kind, GPU work, quality
//   balance_hybrid a hybrid plan + path + queue -> the split where both halves end together
//   estimate_move  plan + path(s) + the receiving GPU's queue -> nanoseconds
//   pick_fastest   candidates (strategy x destination) -> the adaptive choice
// The closed form (`kvshift cost`), the simulator's choice and execution and
// the regression check all call these, so they cannot disagree.
// Leaves out: contention (the simulator's network), batching of
// reconstructions across requests (the simulator's GPU queue).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/compute_costs.hpp"
#include "cost_model/latency.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "cost_model/quality_curve.hpp"
#include "cost_model/strategy.hpp"
#include "cost_model/transfer_engine.hpp"
#include "cost_model/units.hpp"

namespace kvshift::cost_model {

/// What the KV source of a move holds: the live KV (a migration) or a replica of some kind.
enum class SourceKv { kNone, kFull, kKeptLayers, kKeptTokens };

/// The scenario's methods, as far as a plan needs them.
struct MoveMethods {
  const ModelSpec* model = nullptr;
  const OmissionPlan* omission = nullptr;  ///< RISK-KV omitted groups; nullptr or empty: no RISK-KV
  DType predictor_dtype = DType::kF32;
  std::optional<double> retention;  ///< ProxyKV ρ; empty: no ProxyKV
  double risk_delta_nll = 0;        ///< quality cost of a RISK-KV rebuild (nats/token)
  double proxy_delta_nll = 0;       ///< quality cost of a ProxyKV pruning (nats/token)
  TransferEngine engine;            ///< per-transfer and per-descriptor costs of KV legs
  /// Set: RISK-KV's and ProxyKV's ΔNLL by the request's context (measured at several
  /// histories), which replace risk_delta_nll and proxy_delta_nll.
  std::vector<ContextQuality> risk_delta_nll_by_context;
  std::vector<ContextQuality> proxy_delta_nll_by_context;
};

/// The request and what the two ends hold when the move is planned.
struct MoveState {
  std::int64_t context = 0;    ///< KV tokens the request holds (T)
  std::int64_t available = 0;  ///< tokens whose KV the source holds (≤ T; the rest is replayed)
  SourceKv source = SourceKv::kFull;
  bool scored = true;             ///< ProxyKV scores exist for this request
  bool predictor_at_dst = false;  ///< resident at the destination, or already on its way
  /// Leading tokens whose KV the destination already holds (its prefix cache): every plan
  /// moves or rebuilds only the tokens after them, which attend to them.
  std::int64_t dst_cached = 0;
  /// How long the part of dst_cached in the destination node's host or SSD tier takes to reach
  /// HBM (0: all of it is in HBM).
  std::int64_t dst_cached_load_ns = 0;
};

/// Bytes to ship, GPU work at the destination, and the quality it costs.
struct MovePlan {
  Strategy strategy = Strategy::kTokenReplay;  ///< what executes (after the rules below)
  Bytes kv;                                    ///< KV bytes from the source
  /// Token ids from the source, of every token the receiver recomputes (replay, a hybrid's
  /// front, a tail the source never held): recomputing needs the ids, and they travel.
  Bytes tokens;
  Bytes predictor;                      ///< RISK-KV predictors from the predictor store
  std::int64_t kv_tokens = 0;           ///< tokens whose (possibly pruned) KV arrives
  std::int64_t descriptors = 0;         ///< transfer-engine descriptors of `kv`
  std::int64_t reconstruct_tokens = 0;  ///< RISK-KV rebuild on the receiver
  /// Hybrid: the first tokens, prefilled on the receiver while the KV of the rest arrives.
  std::int64_t front_tokens = 0;
  /// Prefill on the receiver after the KV is in (all of T, or the tail the source never held).
  std::int64_t replay_tokens = 0;
  /// Leading tokens already at the destination (MoveState::dst_cached): neither shipped nor
  /// recomputed; the front, shipped KV and replay are the tokens after them.
  std::int64_t cached_tokens = 0;
  /// Until those are in HBM (MoveState::dst_cached_load_ns): the load from the destination's
  /// host or SSD tier runs beside the transfers, and a hybrid's front waits for it.
  std::int64_t cached_load_ns = 0;
  double delta_nll = 0;    ///< quality paid (nats/token)
  std::string infeasible;  ///< why this strategy cannot run here; empty: it can
  std::string note;        ///< why `strategy` differs from the one asked for; empty: it does not

  bool feasible() const { return infeasible.empty(); }
  bool needs_gpu() const { return reconstruct_tokens > 0 || front_tokens > 0 || replay_tokens > 0; }
  /// Tokens the receiver prefills (a hybrid's front and any replayed tail).
  std::int64_t recomputed_tokens() const { return front_tokens + replay_tokens; }
  /// Tokens whose KV is in place when the replay runs (the replayed tail attends to them).
  std::int64_t replay_prefix() const { return cached_tokens + front_tokens + kv_tokens; }
};

/// The plan for moving a request with `state` by strategy `s` (not kAdaptive). A KV strategy
/// whose source holds no KV of the request is a token replay; full_kv from a source holding
/// only a prefix is a prefix_recompute, and prefix_recompute from a complete source a full_kv
/// (note says so). A hybrid plan ships all the source holds until balance_hybrid splits it.
/// With a prefix cached at the destination, the plan is the same strategy's plan for the
/// tokens after it.
MovePlan plan_move(Strategy s, const MoveMethods& methods, const MoveState& state);

/// The predictor bytes RISK-KV ships to a node that does not hold them (0 without RISK-KV).
Bytes predictor_bytes(const MoveMethods& methods);

/// Where the bytes come from. A leg with no path is local (host link) or absent.
struct MoveRoute {
  /// kWithData: the predictor travels the data leg's path with the data (their bytes add up).
  enum class Leg { kNone, kLocal, kNetwork, kUnreachable, kWithData };
  Leg data = Leg::kNone;  ///< source of KV / token ids → destination
  Path data_path{};
  Leg predictor = Leg::kNone;  ///< predictor store → destination
  Path predictor_path{};
  std::int64_t predictor_ready_in_ns = 0;  ///< a fetch already on its way lands in this long
  BitsPerSecond host_link{};               ///< for kLocal legs
  std::int64_t host_link_backlog_ns = 0;   ///< a kLocal data leg waits for the copies ahead
};

/// A plan's time on a route, in nanoseconds rounded as the simulator rounds.
struct MoveEstimate {
  bool reachable = true;
  std::int64_t transfer_ns = 0;  ///< until every byte has arrived (legs run in parallel)
  std::int64_t queue_ns = 0;     ///< waiting for the destination GPU (only with GPU work)
  std::int64_t compute_ns = 0;   ///< rebuild, then replay, on the destination GPU
  /// Hybrid: queue and compute that ran while the bytes were in flight (not in the total).
  std::int64_t overlap_ns = 0;
  /// Hybrid over the network: the front's token ids travel ahead of the KV, as a flow of
  /// their own; the front is queued when they arrive (ids_ns), and the KV's flow starts
  /// once they are on the wire (ids_lead_ns, or after the engine setup if that is longer).
  std::int64_t ids_ns = 0;
  std::int64_t ids_lead_ns = 0;
  std::int64_t total_ns() const { return transfer_ns + queue_ns + compute_ns - overlap_ns; }
};

/// The path between two nodes now, or nothing when one cannot reach the other.
using PathFinder = std::function<std::optional<Path>(int from, int to)>;

/// The legs `plan` travels to node `dst`: its data from `src` and its predictors (when it ships
/// any) from `predictor_src` (-1: no such node; the same node as `dst`: over its host link). A
/// predictor from the data's own source rides with the data.
MoveRoute make_route(const MovePlan& plan, int src, int predictor_src, int dst,
                     BitsPerSecond host_link, const PathFinder& path_to);

/// Nanoseconds of one leg: latency, then 8·bytes/B (0 for no bytes or no leg). The data
/// leg of a plan that ships KV also pays engine_ns(plan.descriptors) before its bytes flow.
std::int64_t leg_ns(MoveRoute::Leg leg, const Path& path, BitsPerSecond host_link, Bytes bytes);

/// Prices `plan` on `route`: transfers, then GPU work behind `gpu_backlog_ns` of queued work.
/// A hybrid's front is queued once its token ids are in (over the network they travel first,
/// on the same node they are in host memory) and runs while the KV arrives; its tail comes
/// after both.
MoveEstimate estimate_move(const MovePlan& plan, const MoveMethods& methods, const MoveRoute& route,
                           std::int64_t gpu_backlog_ns, const ComputeCosts& compute);

/// Splits a hybrid plan at the KV block boundary where the receiver's prefill of the front
/// (behind `gpu_backlog_ns`) and the transfer of the rest end together: the fastest of the
/// block boundaries either side of the crossing, shipping everything and recomputing
/// everything (then in one pass, the tail included). Any other plan is returned as it is.
MovePlan balance_hybrid(MovePlan plan, const MoveMethods& methods, const MoveRoute& route,
                        std::int64_t gpu_backlog_ns, const ComputeCosts& compute);

/// One option of the adaptive choice.
struct MoveCandidate {
  MovePlan plan;
  MoveEstimate estimate;
  int destination = -1;  ///< caller's id (a GPU index)
};

/// The fastest feasible, reachable candidate whose quality cost is within `quality_budget`;
/// ties go to the earlier candidate. Empty when none qualifies.
std::optional<std::size_t> pick_fastest(const std::vector<MoveCandidate>& candidates,
                                        std::optional<double> quality_budget);

}  // namespace kvshift::cost_model
