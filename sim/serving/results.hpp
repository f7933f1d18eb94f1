// What one simulated run produced, as plain records: every request, every
// move (migration or recovery), link utilisation samples and GPU time split.
// The serving model fills these; reports/ turns them into files. Nothing here
// is wall-clock: a scenario and a seed give the same records everywhere.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvshift::sim {

/// Why a request's KV moved. kHandoff: prefill pool -> decode pool (P/D disaggregation).
enum class MoveTrigger { kFailure, kDrain, kRebalance, kHandoff };

constexpr const char* move_trigger_name(MoveTrigger t) {
  switch (t) {
    case MoveTrigger::kFailure:
      return "failure";
    case MoveTrigger::kDrain:
      return "drain";
    case MoveTrigger::kRebalance:
      return "rebalance";
    case MoveTrigger::kHandoff:
      return "handoff";
  }
  return "?";
}

/// How a move ended: exactly one of these, once.
enum class MoveOutcome { kDone, kFailed, kCancelled, kUnfinished };

constexpr const char* move_outcome_name(MoveOutcome o) {
  switch (o) {
    case MoveOutcome::kDone:
      return "done";
    case MoveOutcome::kFailed:
      return "failed";
    case MoveOutcome::kCancelled:
      return "cancelled";
    case MoveOutcome::kUnfinished:
      return "unfinished";
  }
  return "?";
}

/// How a request ended.
enum class RequestOutcome { kCompleted, kFailed, kUnfinished };

constexpr const char* request_outcome_name(RequestOutcome o) {
  switch (o) {
    case RequestOutcome::kCompleted:
      return "completed";
    case RequestOutcome::kFailed:
      return "failed";
    case RequestOutcome::kUnfinished:
      return "unfinished";
  }
  return "?";
}

struct RequestRecord {
  std::uint64_t id = 0;
  int deployment = 0;  ///< index into RunResult::deployments (0 with one model)
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t arrival_ns = 0;
  std::int64_t first_token_ns = -1;  ///< -1: never
  std::int64_t finish_ns = -1;       ///< -1: never
  std::string first_node;            ///< where it was first placed
  std::string final_node;            ///< where it finished (or last was)
  int moves = 0;
  int preemptions = 0;  ///< times it was preempted (serving.preemption)
  RequestOutcome outcome = RequestOutcome::kUnfinished;
  std::string reason;  ///< failed: why; unfinished: what it was doing at the end
  bool operator==(const RequestRecord&) const = default;
};

/// One migration or recovery of one request.
struct MoveRecord {
  std::uint64_t request = 0;
  int deployment = 0;  ///< its request's
  MoveTrigger trigger = MoveTrigger::kFailure;
  std::string from;
  std::string to;
  std::string requested;  ///< the strategy the run asked for ("adaptive" included)
  std::string strategy;   ///< the strategy executed (after fallbacks; "" if none ran)
  std::int64_t context_tokens = 0;
  std::int64_t available_tokens = 0;  ///< tokens whose KV (or pruned KV) was shipped
  std::int64_t front_tokens = 0;      ///< hybrid: tokens recomputed while the rest arrived
  std::int64_t tail_tokens = 0;       ///< tokens recomputed on the receiver after the KV was in
  std::int64_t cached_tokens = 0;  ///< leading tokens the destination's prefix cache held already
  std::string source;              ///< node the KV or token ids came from ("" = none)
  std::string predictor_source;    ///< node the RISK-KV predictors were shipped from ("" = none)
  std::int64_t start_ns = 0;       ///< trigger time (failure detected, migration decided)
  std::int64_t end_ns = 0;         ///< request can decode again
  std::int64_t stall_ns = 0;       ///< end − when the request stopped making progress
  std::int64_t kv_bytes = 0;       ///< KV bytes moved over the network
  std::int64_t predictor_bytes = 0;
  std::int64_t token_bytes = 0;
  std::int64_t transfer_ns = 0;   ///< time spent moving bytes
  std::int64_t compute_ns = 0;    ///< reconstruction / replay on the receiving GPU
  std::int64_t queue_ns = 0;      ///< waiting for the receiving GPU
  std::int64_t estimated_ns = 0;  ///< the estimator's total for the executed plan, when planned
  double delta_nll = 0;           ///< quality cost paid (nats/token; 0 unless it rebuilt lossily)
  MoveOutcome outcome = MoveOutcome::kDone;
  std::string fallback;  ///< why `strategy` differs from `requested` (empty: it does not)
  std::string note;      ///< failed / cancelled / unfinished: why
  bool operator==(const MoveRecord&) const = default;
};

/// One link direction at one sampling instant.
struct LinkSample {
  std::int64_t t_ns = 0;
  std::string link;
  double utilisation = 0;   ///< mean over the interval ending at t: 8·bytes / (capacity·interval)
  std::int64_t bytes = 0;   ///< bytes settled since the previous sample
  double capacity_bps = 0;  ///< the direction's capacity at t (a degraded link's is lower)
};

/// Bytes moved over the network, by what they were.
struct BytesByKind {
  std::int64_t kv = 0;
  std::int64_t replica_stream = 0;
  std::int64_t predictors = 0;
  std::int64_t tokens = 0;
};

/// GPU busy time, by what it was doing (ns summed over GPUs).
struct GpuTime {
  std::int64_t prefill = 0;
  std::int64_t decode = 0;
  std::int64_t reconstruct = 0;
  std::int64_t replay = 0;
  std::int64_t proxy_scoring = 0;
  std::int64_t recompute = 0;  ///< preempted requests' prefills again (serving.preemption)
  std::int64_t batched_reconstructions = 0;  ///< reconstruction GEMMs that served > 1 request
};

/// Prefix caching over a run (serving.prefix_cache); all zero when it is off.
struct PrefixCacheStats {
  std::int64_t prefills = 0;          ///< prefills started on a GPU with a cache
  std::int64_t prompt_tokens = 0;     ///< their prompt tokens
  std::int64_t lookups = 0;           ///< of those, prefills with cacheable blocks
  std::int64_t lookup_tokens = 0;     ///< the tokens of those blocks
  std::int64_t hits = 0;              ///< prefills that reused at least one block
  std::int64_t hit_tokens = 0;        ///< prompt tokens reused instead of prefilled
  std::int64_t saved_prefill_ns = 0;  ///< Σ prefill(T) − extend(P, T − P) over the hits
  std::int64_t inserted_blocks = 0;
  std::int64_t evicted_blocks = 0;
  std::int64_t lost_blocks = 0;     ///< dropped with a failed GPU's HBM
  std::int64_t resident_bytes = 0;  ///< cached at the end of the run, over all GPUs
  /// A tier below HBM, over all nodes: host DRAM (serving.prefix_cache.host_offload) or the
  /// local SSD below it (ssd_tier). Blocks reach host DRAM written through after prefill, and
  /// the SSD when host DRAM evicts them.
  struct Tier {
    std::int64_t hits = 0;            ///< prefills that loaded at least one block from it
    std::int64_t hit_tokens = 0;      ///< prompt tokens loaded instead of prefilled
    std::int64_t move_loads = 0;      ///< moves that loaded at least one block from it
    std::int64_t move_tokens = 0;     ///< tokens those loaded instead of receiving or rebuilding
    std::int64_t read_bytes = 0;      ///< towards HBM, over the host links (prefills and moves)
    std::int64_t written_blocks = 0;  ///< blocks new to the tier
    std::int64_t written_bytes = 0;
    std::int64_t evicted_blocks = 0;  ///< to make room (for other blocks, or for replicas)
    std::int64_t lost_blocks = 0;     ///< dropped with a failed node (host DRAM; an SSD keeps them)
    std::int64_t resident_bytes = 0;  ///< held at the end of the run
    std::int64_t peak_bytes = 0;      ///< the most held at once
    /// The storage tier: fetches lost with their path or the node (those blocks were prefilled).
    std::int64_t failed_reads = 0;
  };
  Tier host, ssd, storage;
};

/// Preemption over a run (serving.preemption); all zero when it is off.
struct PreemptionStats {
  std::int64_t preemptions = 0;         ///< requests taken off a GPU to make room
  std::int64_t preempted_requests = 0;  ///< distinct requests preempted at least once
  std::int64_t recomputes = 0;          ///< resumptions by a prefill of prompt + produced tokens
  std::int64_t recompute_tokens = 0;    ///< tokens those prefilled
  std::int64_t recompute_cached_tokens = 0;  ///< prompt tokens they found in the GPU's cache
  std::int64_t swap_outs = 0;                ///< preemptions whose KV went to host DRAM
  std::int64_t swap_out_bytes = 0;
  std::int64_t swap_ins = 0;  ///< resumptions that copied it back
  std::int64_t swap_in_bytes = 0;
  /// Swap asked, recomputed instead: host DRAM had no room, or the node failed or drained
  /// before the request came back.
  std::int64_t swap_fallbacks = 0;
  std::int64_t swapped_peak_bytes = 0;  ///< the most held in host DRAM at once, over all nodes
};

/// Copies over the GPUs' host links (tier loads, write-through, local replicas and moves,
/// swaps) and the nodes' SSD reads and writes, each channel serving its copies in turn.
struct HostLinkStats {
  std::int64_t to_gpu_bytes = 0, from_gpu_bytes = 0;
  std::int64_t busy_ns = 0;        ///< copy time, summed over both directions of every GPU
  std::int64_t waited_ns = 0;      ///< time copies waited for the ones ahead of them
  std::int64_t ssd_waited_ns = 0;  ///< time SSD reads and writes waited for those ahead
};

/// One trace-event span (Chrome trace format: one track per node or link).
struct TraceSpan {
  std::string track;  ///< "node:gpu3/0", "link:leaf1-spine0"
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
};

/// What the summary needs of a run's requests and moves, gathered record by record as
/// they become final: counts, and the latency samples its percentiles are taken from
/// (16 bytes a request instead of its whole record). Samples keep record order, so the
/// means add up in the same order whether the records were kept or streamed.
struct RunTally {
  std::int64_t arrived = 0, completed = 0, failed = 0, unfinished = 0;
  std::int64_t output_tokens = 0;  ///< of completed requests
  std::vector<double> ttft_s;      ///< requests that produced a first token
  std::vector<double> e2e_s;       ///< completed requests
  std::vector<double> tpot_s;      ///< completed requests with more than one output token
  /// Arrival (s) of requests unfinished without a first token: their TTFT is at least
  /// the run's end minus this (the report adds them as lower bounds).
  std::vector<double> ttft_open_arrival_s;
  std::int64_t recoveries = 0, migrations = 0, handoffs = 0;  ///< done moves by kind
  std::int64_t failed_moves = 0, cancelled_moves = 0;
  std::int64_t open_recoveries = 0, open_migrations = 0, open_handoffs = 0;  ///< unfinished
  std::int64_t fallbacks = 0;  ///< moves (rows) that ran another strategy, whatever their outcome
  std::int64_t lossy = 0;      ///< of done moves
  double delta_nll_sum = 0;    ///< of done moves
  std::map<std::string, std::int64_t> by_strategy;  ///< done moves by executed strategy
  /// Done and unfinished moves (the latter at their lower bound end − start).
  std::vector<double> recovery_s, recovery_stall_s, migration_s, handoff_s;

  void add(const RequestRecord& r);
  void add(const MoveRecord& m);
  bool operator==(const RunTally&) const = default;
};

/// Receives each request and move record once, when it is final: requests in id order,
/// moves in the order they end (those open at the end of the run last) — the order of
/// requests.csv and recoveries.csv. Lets a run write its records as it goes instead of
/// holding them (a fleet-scale hour finishes millions).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  /// Before the first record of each strategy's run.
  virtual void begin_run(const std::string& strategy) = 0;
  virtual void request(const RequestRecord& r) = 0;
  virtual void move(const MoveRecord& m) = 0;
};

/// Where a run's records go: always into the tally; also to `sink`, and kept in
/// RunResult::requests / moves when `keep` (tests, kvshift check, trace.json).
struct RecordOptions {
  bool trace = true;  ///< collect trace spans
  bool keep = true;
  RecordSink* sink = nullptr;
};

/// Everything one strategy's run produced.
struct RunResult {
  std::string strategy;
  std::int64_t duration_ns = 0;
  RunTally tally;
  /// With several deployments: each one's name and tally (the records it served); empty
  /// with one model.
  struct Deployment {
    std::string name;
    RunTally tally;
  };
  std::vector<Deployment> deployments;
  std::vector<RequestRecord> requests;  ///< empty unless RecordOptions::keep
  std::vector<MoveRecord> moves;        ///< empty unless RecordOptions::keep
  std::vector<LinkSample> link_samples;
  std::vector<TraceSpan> trace;
  BytesByKind bytes;
  GpuTime gpu_time;
  PrefixCacheStats prefix_cache;
  PreemptionStats preemption;
  HostLinkStats host_links;
  std::int64_t replica_bytes_held_peak = 0;   ///< KV held on replicas at peak
  std::int64_t replica_bytes_full_equiv = 0;  ///< what a full replica would have held then
  std::int64_t unprotected = 0;        ///< requests that once found no node with replica room
  double replica_room_peak_share = 0;  ///< highest share of one node's room replicas booked
  std::int64_t gpus = 0;               ///< GPUs in the cluster (bounds GPU busy time)
  std::int64_t predictor_copies = 0;   ///< predictor copies resident at the end
  std::int64_t predictor_bytes_resident = 0;  ///< their bytes
  /// node -> RISK-KV moves that rebuilt with its copy (done moves only)
  std::map<std::string, std::int64_t> predictor_uses;
  /// Predictor copies that arrived after every move waiting for them had ended: on the
  /// network (links.csv) but in no move's row, so not in bytes.predictors.
  std::int64_t predictor_bytes_unclaimed = 0;
  std::int64_t events = 0;  ///< simulator events processed
};

}  // namespace kvshift::sim
