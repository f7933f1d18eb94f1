// SimulationSpec: what the serving simulator simulates, as plain typed structs
// (the model, the cluster, the workload, the failures, the methods). A scenario
// (input/scenario_spec.hpp) is one of these plus what only the tool around
// the simulator reads: its name, cost source, SLOs and output files. The loader
// fills both from JSON, converting every unit string once; nothing here knows
// about JSON, files or Boost. A cluster generator (star, ring, leaf-spine,
// multi-site) is expanded into its nodes and links (sim/generators.hpp), so the
// simulator only reads `ClusterSpec::nodes` and `links`. A trace file is
// already read into `trace`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/omission_plan.hpp"
#include "cost_model/units.hpp"
#include "sim/cluster.hpp"

namespace kvshift::sim {

// ---------------------------------------------------------------- cluster

/// Which generator (sim/generators.hpp) made the cluster's first nodes and links.
enum class ClusterGenerator { kExplicit, kStar, kRing, kLeafSpine, kMultiSite };

/// The scenario's cluster: generated nodes and links first, then the explicit ones.
struct ClusterSpec : Cluster {
  ClusterGenerator generator = ClusterGenerator::kExplicit;
  /// Set: transfers spread over equal-cost shortest paths, each picked by a hash of this seed
  /// and the transfer (sim::NetworkOptions::ecmp); empty: every transfer takes one path.
  std::optional<std::uint64_t> ecmp_seed;
};

// ---------------------------------------------------------------- workload

enum class TokenDistKind { kFixed, kUniform, kLognormal };

/// Token count distribution. Fixed: `value`. Uniform: integers in [min, max].
/// Lognormal: mean `mean`, coefficient of variation `cv`, clamped to [min, max].
struct TokenDist {
  TokenDistKind kind = TokenDistKind::kFixed;
  std::int64_t value = 0;
  std::int64_t min = 1;
  std::int64_t max = 1'000'000;
  double mean = 0;
  double cv = 0;
};

enum class ArrivalKind { kPoisson, kGamma, kTrace };

/// One request of a trace file (arrival relative to the trace's first request).
struct TraceRequest {
  Seconds arrival;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  /// Keys of the prompt's leading blocks (Mooncake hash_ids: equal key, equal prefix); empty
  /// when the trace has none.
  std::vector<std::uint64_t> block_hashes;
  /// The model it asks for (the trace's "model" field or column; empty: none), and which of
  /// the scenario's deployments that is (the loader resolves it; -1: drawn by share).
  std::string model;
  int deployment = -1;
};

/// Generated arrivals: a share of requests open with one of `groups` common prefixes (a
/// system prompt, a few-shot template) of `tokens` tokens, capped at the prompt's length.
struct SharedPrefixSpec {
  double share = 0;  ///< of requests, in [0, 1]
  int groups = 1;
  std::int64_t tokens = 0;
};

struct WorkloadSpec {
  ArrivalKind arrival = ArrivalKind::kPoisson;
  double rate_per_s = 0;            ///< mean arrivals per second (poisson, gamma)
  double cv = 1.0;                  ///< gamma: coefficient of variation of inter-arrival times
  TokenDist prompt_tokens;          ///< poisson, gamma
  TokenDist output_tokens;          ///< poisson, gamma
  std::string trace_path;           ///< trace: resolved path
  double time_scale = 1.0;          ///< trace: arrival times are multiplied by this
  std::vector<TraceRequest> trace;  ///< trace: the file's requests, arrival-sorted
  std::int64_t max_requests = 0;    ///< 0 = no limit (the scenario's duration still ends arrivals)
  std::optional<SharedPrefixSpec> shared_prefix;  ///< poisson, gamma
};

/// How requests are served on each GPU.
/// Prompt blocks kept in each GPU's free HBM for reuse (sim/serving/prefix_cache.hpp).
struct PrefixCacheSpec {
  bool enabled = false;
  std::int64_t block_tokens = 512;  ///< tokens a key names (Mooncake's hash_ids: 512)
  /// A second tier in each node's host DRAM: prompt blocks are written through to it after
  /// prefill, and a block gone from a GPU's HBM loads from it over the host link.
  bool host_offload = false;
  /// A third tier, each GPU node's local SSD (needs host_offload): the blocks the host tier
  /// evicts are written to it at `write_bandwidth`, and a block found only here is read into
  /// host DRAM at `read_bandwidth` before it crosses the host link; reads and writes take
  /// turns on the SSD. It survives node failures.
  struct SsdTier {
    Bytes capacity;  ///< per GPU node
    BitsPerSecond read_bandwidth;
    BitsPerSecond write_bandwidth;  ///< the scenario's, or read_bandwidth when it gives none
  };
  std::optional<SsdTier> ssd_tier;
  /// The last tier, shared by every GPU node: a storage node (needs host_offload). The blocks
  /// the lowest local tier evicts are sent to it over the network; a prefill whose blocks are
  /// in no local tier fetches them from it over the network, then the host link. It keeps what
  /// the replicas there leave of the node's capacity, and loses its blocks when the node fails.
  struct StorageTier {
    std::string node;
  };
  std::optional<StorageTier> storage_tier;
};

/// Preemption when HBM runs out, as vLLM does: admission books a request's prompt (leaving a
/// watermark of each GPU's HBM free), its KV grows block by block as it decodes, and when a
/// decode step finds no room the latest-arrived request on that GPU is preempted.
struct PreemptionSpec {
  /// kRecompute: its KV is dropped and rebuilt later by a prefill of its prompt and the tokens
  /// it produced. kSwap: its KV is copied to its node's host DRAM over the host link and copied
  /// back to a GPU of that node when there is room (recomputed when host DRAM has no room).
  enum class Mode { kRecompute, kSwap };
  Mode mode = Mode::kRecompute;
  double watermark = 0.01;  ///< share of each GPU's KV room admission leaves free for growth
};

constexpr const char* preemption_mode_name(PreemptionSpec::Mode m) {
  return m == PreemptionSpec::Mode::kSwap ? "swap" : "recompute";
}

struct ServingSpec {
  int max_batch = 32;                 ///< requests decoded together on one GPU
  std::int64_t kv_block_tokens = 16;  ///< paged KV block size in tokens
  /// Chunked prefill: a prompt (or a replay) is computed this many tokens at a time, with a
  /// decode step of the GPU's batch between chunks; 0: whole.
  std::int64_t prefill_chunk_tokens = 0;
  PrefixCacheSpec prefix_cache;
  /// Empty: admission books each request's final KV size, so no request is ever preempted.
  std::optional<PreemptionSpec> preemption;
};

// ---------------------------------------------------------------- pools and the transfer engine

/// How a pool (or the whole cluster) picks a GPU for a request. kPrefixAware (with
/// prefix caching): the GPU whose first token would come soonest — its queue, the load of
/// its cached prefix from the host tier, the prefill of the rest; moves take least loaded.
enum class Router { kLeastLoaded, kKvAware, kRoundRobin, kRandom, kPrefixAware };

/// What a pool's GPUs do: prefill only, decode only, or both (no disaggregation).
enum class PoolRole { kMixed, kPrefill, kDecode };

/// A named set of gpu nodes with a role, a routing policy and (optionally) its own GPU.
struct PoolSpec {
  std::string name;
  PoolRole role = PoolRole::kMixed;
  Router router = Router::kLeastLoaded;
  std::optional<cost_model::GpuSpec> gpu;  ///< empty: the scenario's GPU
};

/// Costs of the KV transfer engine on every KV move (handoffs, migrations, recoveries);
/// the descriptor block size is serving.kv_block_tokens. Zeros: an ideal link.
struct TransferEngineSpec {
  Seconds setup;                         ///< per transfer
  Seconds per_block;                     ///< per descriptor (block × layer × K/V)
  int max_inflight_per_destination = 0;  ///< KV moves into one node at once; 0: no cap
  std::optional<Seconds> stall_timeout;  ///< a stalled transfer fails after this; empty: never
};

// ---------------------------------------------------------------- KV protection

/// What survives a failure: nothing, a full replica, RISK-KV's kept layers, or ProxyKV's kept
/// tokens.
enum class ProtectionMode { kNone, kFull, kRiskKv, kProxyKv };

/// Where a request's replica lives: another GPU node's host DRAM (the next one, or the one
/// holding least), a storage node, or its own node's host DRAM (`local`: survives a GPU
/// failure, not a node failure).
enum class ReplicaPlacement { kNextNode, kLeastLoaded, kStorage, kLocal };

struct ProtectionSpec {
  ProtectionMode mode = ProtectionMode::kNone;
  ReplicaPlacement placement = ReplicaPlacement::kNextNode;
  std::string store;                      ///< placement storage: the storage node's name
  std::int64_t stream_every_tokens = 16;  ///< replica stream granularity
};

// ---------------------------------------------------------------- events

enum class EventKind {
  kNodeFailure,
  kNodeRepair,
  kLinkDegrade,
  kLinkFailure,
  kLinkRepair,
  kDrain,
  kPathStall,    ///< KV transfers from one node to another hang (the transfer engine, not a link)
  kPathFailure,  ///< KV transfers from one node to another fail at once
  kGpuFailure,   ///< one GPU of a node fails (its HBM is lost); the node and its host DRAM stay
};

struct EventSpec {
  EventKind kind = EventKind::kNodeFailure;
  Seconds at;
  std::string node;                        ///< node events
  int gpu = 0;                             ///< gpu_failure: which GPU of the node
  std::string link;                        ///< link events
  std::string from, to;                    ///< path events: source and destination node
  Seconds detection_delay;                 ///< node_failure, gpu_failure: until recovery starts
  std::optional<Seconds> repair_after;     ///< *_failure, link_degrade: auto repair
  std::optional<BitsPerSecond> bandwidth;  ///< link_degrade: the degraded bandwidth
  std::optional<Seconds> latency;          ///< link_degrade: the degraded latency
};

// ---------------------------------------------------------------- policies

using cost_model::Strategy;  ///< defined with the move plans (cost_model/move_plan.hpp)

/// Load-balancing migrations: a node whose KV use crosses `threshold` moves requests away.
struct RebalanceSpec {
  bool enabled = false;
  double threshold = 0.9;  ///< share of the node's KV capacity
  Seconds check_interval{1.0};
};

struct PolicySpec {
  std::vector<Strategy> strategies;  ///< one simulated run per strategy, compared in the results
  Router router = Router::kLeastLoaded;
  std::optional<double> quality_budget;  ///< max ΔNLL (nats/token) a lossy strategy may cost
  RebalanceSpec rebalance;
};

// ---------------------------------------------------------------- methods

struct RiskKvSpec {
  cost_model::OmissionPlan omission;
  std::string topology_source;  ///< as written: "paper", "G2,G5", or the resolved path
  double delta_nll = 0;         ///< measured ΔNLL of the topology (nats/token)
  /// Where delta_nll comes from: "scenario constant, not measured (...)" for a hand-written
  /// value (one that overrides a calibrated topology says so), or the topology.json with its
  /// digest.
  std::string delta_nll_source = "scenario constant, not measured";
  cost_model::DType predictor_dtype = cost_model::DType::kF32;
  /// Share of the calibration's held-out test requests whose own ΔNLL exceeded its ε
  /// (topology.json "quality.violation_share"); unknown for hand-written topologies.
  std::optional<double> violation_share;
  /// With quality files at several histories: ΔNLL by a move's context (delta_nll is then
  /// the one at the shortest history), sorted by context.
  std::vector<cost_model::ContextQuality> delta_nll_by_context;
};

/// Where the proxy model runs: on the target's GPU (second stream) or on its own GPU.
enum class ProxyPlacement { kTargetStream, kProxyGpu };

struct ProxyKvSpec {
  cost_model::ModelSpec proxy_model;
  ProxyPlacement placement = ProxyPlacement::kTargetStream;
  double retention = 0.5;  ///< ρ: share of tokens kept
  double delta_nll = 0;    ///< NLL change at ρ (nats/token)
  /// Where delta_nll comes from: "scenario constant, not measured" (written by hand) or the
  /// quality.json it was read from, with its digest and how (e.g. "quality.json
  /// (fnv1a64:...): proxykv interpolated between ρ 0.3 and 0.5").
  std::string delta_nll_source = "scenario constant, not measured";
  /// The quality.json's share of its requests whose own ΔNLL exceeded `eps` at ρ (interpolated
  /// like delta_nll); unknown for a hand-written delta_nll.
  std::optional<double> over_eps_share;
  double eps = 0;
  /// With quality files at several histories: ΔNLL by a move's context (delta_nll is then
  /// the one at the shortest history), sorted by context.
  std::vector<cost_model::ContextQuality> delta_nll_by_context;
};

enum class PredictorPlacement { kPreloaded, kOnDemand };

struct PredictorSpec {
  PredictorPlacement placement = PredictorPlacement::kPreloaded;
  std::optional<Bytes> hbm_budget;   ///< on_demand: cache size per GPU (LRU); default: unlimited
  std::string source;                ///< on_demand: node the predictors are shipped from
  bool batch_reconstruction = true;  ///< requests recovered together share one GEMM
};

// ---------------------------------------------------------------- deployments

/// One model a scenario serves: its pools, its share of the arrivals that do not name a
/// model, and its own RISK-KV / ProxyKV methods (predictors are its own; the predictors
/// section's placement applies to each deployment's).
struct DeploymentSpec {
  std::string name;
  cost_model::ModelSpec model;
  std::optional<RiskKvSpec> risk_kv;
  std::optional<ProxyKvSpec> proxy_kv;
  std::vector<int> pools;  ///< indices into SimulationSpec::pools
  double share = 1;        ///< of the arrivals that do not name a model
  /// Generated arrivals: its own prompt and output lengths; empty: the workload's.
  std::optional<TokenDist> prompt_tokens, output_tokens;
};

// ---------------------------------------------------------------- the simulation

struct SimulationSpec {
  /// The model served, and its methods (risk_kv, proxy_kv); with several deployments, the
  /// first deployment's (the serving model reads `deployments`).
  cost_model::ModelSpec model;
  cost_model::GpuSpec gpu;
  ClusterSpec cluster;
  WorkloadSpec workload;
  ServingSpec serving;
  ProtectionSpec protection;
  std::vector<EventSpec> events;  ///< sorted by time (stable)
  PolicySpec policies;
  std::optional<RiskKvSpec> risk_kv;
  std::optional<ProxyKvSpec> proxy_kv;
  PredictorSpec predictors;
  /// Empty: one implicit mixed pool of every GPU, routed by policies.router.
  std::vector<PoolSpec> pools;
  /// Empty: one deployment, of `model`, `risk_kv` and `proxy_kv`, on every GPU. Otherwise
  /// two or more, each on its own pools (every pool in exactly one).
  std::vector<DeploymentSpec> deployments;
  TransferEngineSpec transfer_engine;
  std::uint64_t seed = 1;
  Seconds duration;
  Seconds link_sample_interval{1.0};  ///< links.csv's interval; 0: links are not sampled
};

/// Stable names used in files and reports ("full_kv", "node_failure", ...).
using cost_model::strategy_name;

constexpr const char* event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kNodeFailure:
      return "node_failure";
    case EventKind::kNodeRepair:
      return "node_repair";
    case EventKind::kLinkDegrade:
      return "link_degrade";
    case EventKind::kLinkFailure:
      return "link_failure";
    case EventKind::kLinkRepair:
      return "link_repair";
    case EventKind::kDrain:
      return "drain";
    case EventKind::kPathStall:
      return "path_stall";
    case EventKind::kPathFailure:
      return "path_failure";
    case EventKind::kGpuFailure:
      return "gpu_failure";
  }
  return "?";
}

/// A model's methods as the move planner takes them (cost_model/move_plan.hpp). They point
/// into `model` and `risk`, which must outlive them.
inline cost_model::MoveMethods move_methods(const SimulationSpec& spec,
                                            const cost_model::ModelSpec& model,
                                            const std::optional<RiskKvSpec>& risk,
                                            const std::optional<ProxyKvSpec>& proxy) {
  cost_model::MoveMethods m;
  m.model = &model;
  if (risk) {
    m.omission = &risk->omission;
    m.predictor_dtype = risk->predictor_dtype;
    m.risk_delta_nll = risk->delta_nll;
    m.risk_delta_nll_by_context = risk->delta_nll_by_context;
  }
  if (proxy) {
    m.retention = proxy->retention;
    m.proxy_delta_nll = proxy->delta_nll;
    m.proxy_delta_nll_by_context = proxy->delta_nll_by_context;
  }
  m.engine = {spec.transfer_engine.setup, spec.transfer_engine.per_block,
              spec.serving.kv_block_tokens};
  return m;
}

/// The scenario's methods (its first deployment's).
inline cost_model::MoveMethods move_methods(const SimulationSpec& spec) {
  return move_methods(spec, spec.model, spec.risk_kv, spec.proxy_kv);
}

inline cost_model::MoveMethods move_methods(const SimulationSpec& spec, const DeploymentSpec& d) {
  return move_methods(spec, d.model, d.risk_kv, d.proxy_kv);
}

/// The deployments a run serves: `spec.deployments`, or the one implicit deployment of the
/// scenario's model on every pool.
inline std::vector<DeploymentSpec> served_deployments(const SimulationSpec& spec) {
  if (!spec.deployments.empty()) return spec.deployments;
  DeploymentSpec d{spec.model.name, spec.model, spec.risk_kv, spec.proxy_kv, {}, 1};
  for (std::size_t p = 0; p < spec.pools.size(); ++p) d.pools.push_back(static_cast<int>(p));
  return {d};
}

constexpr const char* pool_role_name(PoolRole r) {
  switch (r) {
    case PoolRole::kMixed:
      return "mixed";
    case PoolRole::kPrefill:
      return "prefill";
    case PoolRole::kDecode:
      return "decode";
  }
  return "?";
}

/// Whether the scenario disaggregates prefill and decode (it has a prefill pool).
inline bool disaggregated(const SimulationSpec& spec) {
  for (const PoolSpec& p : spec.pools) {
    if (p.role == PoolRole::kPrefill) return true;
  }
  return false;
}

constexpr const char* protection_name(ProtectionMode m) {
  switch (m) {
    case ProtectionMode::kNone:
      return "none";
    case ProtectionMode::kFull:
      return "full";
    case ProtectionMode::kRiskKv:
      return "risk_kv";
    case ProtectionMode::kProxyKv:
      return "proxy_kv";
  }
  return "?";
}

}  // namespace kvshift::sim
