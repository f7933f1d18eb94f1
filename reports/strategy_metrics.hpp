// One strategy's results as plain typed values: the per-strategy entry of
// summary.json. Computed once from a run (every value already rounded the way
// the file holds it, so a struct read back from a file equals the one that
// wrote it); written and read only here, so this file is the one place that
// spells the summary's per-strategy keys. Readers (the console table, the
// HTML report, `kvshift check`, sweep tables and objectives) take the struct.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "input/scenario_spec.hpp"
#include "sim/serving/results.hpp"

namespace kvshift::reports {

/// Rounds to the nanosecond so every file holds the same digits everywhere.
double r9(double v);

/// A latency distribution in seconds; the statistics mean something only when count > 0.
struct Distribution {
  std::int64_t count = 0;
  double mean_s = 0, p50_s = 0, p90_s = 0, p99_s = 0, max_s = 0;
  std::optional<std::int64_t> unfinished;           ///< moves: still open at the end
  std::optional<std::int64_t> without_first_token;  ///< TTFT: requests with none at the end
  bool includes_lower_bounds = false;               ///< open ones counted at their lower bound
};

struct RequestCounts {
  std::int64_t arrived = 0, completed = 0, failed = 0, unfinished = 0;
};

struct MoveCounts {
  std::int64_t recoveries = 0, migrations = 0, failed = 0, cancelled = 0, unfinished = 0;
  std::int64_t fallbacks = 0;
  std::map<std::string, std::int64_t> by_strategy;  ///< done moves by executed strategy
  std::optional<std::int64_t> handoffs;             ///< disaggregated serving only
};

struct ByteCounts {
  std::int64_t kv = 0, replica_stream = 0, predictors = 0, tokens = 0;
};

struct GpuSeconds {
  double prefill = 0, decode = 0, reconstruct = 0, replay = 0, proxy_scoring = 0;
};

struct ReplicaUse {
  std::int64_t peak_bytes = 0, full_equivalent_bytes = 0, saved_bytes = 0;
  double room_peak_share = 0;
  std::int64_t unprotected_requests = 0;
};

/// Copies over the GPUs' host links and the nodes' SSD reads and writes (sim::HostLinkStats).
struct HostLinkUse {
  std::int64_t to_gpu_bytes = 0, from_gpu_bytes = 0;
  double busy_s = 0, waited_s = 0, ssd_waited_s = 0;
};

struct PredictorUse {
  std::int64_t copies = 0, bytes_resident = 0;
  std::int64_t uses = 0;  ///< done RISK-KV rebuilds
  double requests_per_copy = 0;
  std::int64_t batched_reconstructions = 0;
  /// Copies that arrived after every move waiting for them had ended: on the network but in
  /// no move's row (bytes.predictors is the rows' sum).
  std::int64_t bytes_unclaimed = 0;
};

/// What the lossy moves cost in quality, and where each ΔNLL comes from: a measured file with
/// its digest, or "scenario constant, not measured".
struct Quality {
  struct ProxyKv {
    double delta_nll = 0;
    std::string delta_nll_source;
    std::int64_t moves = 0;  ///< moves made with proxy_kv (absent from older summaries: 0)
    /// The measured share of requests over ε times `moves`; unknown (nullopt) when the ΔNLL
    /// is a constant or its file has no per-request share.
    std::optional<double> expected_requests_over_eps;
    std::string over_eps_source;  ///< the share and its file, or why it is unknown
  };
  struct RiskKv {
    std::int64_t moves = 0;  ///< rebuilds made with risk_kv
    double expected_requests_over_eps = 0;
    std::string over_eps_source;
  };
  /// A method's ΔNLL per move (nats/token) and where it comes from.
  struct Charge {
    double delta_nll = 0;
    std::string source;
  };
  std::int64_t lossy_moves = 0;
  double delta_nll_mean_per_move = 0;
  std::optional<ProxyKv> proxy_kv;       ///< scenarios with proxy_kv
  std::optional<RiskKv> risk_kv;         ///< risk_kv with a calibrated violation share
  std::optional<Charge> risk_kv_charge;  ///< scenarios with risk_kv
};

struct PrefixCacheUse {
  /// A tier below HBM (sim::PrefixCacheStats::Tier); an SSD never loses blocks, and its
  /// summary entry has no lost_blocks.
  struct Tier {
    std::int64_t hits = 0, hit_tokens = 0, read_bytes = 0, written_blocks = 0, written_bytes = 0,
                 evicted_blocks = 0, lost_blocks = 0, resident_bytes_at_end = 0, peak_bytes = 0;
    std::int64_t move_loads = 0, move_tokens = 0;  ///< moves that loaded their prefix from it
    std::int64_t failed_reads = 0;                 ///< the storage tier's lost fetches
  };
  std::int64_t prefills = 0, lookups = 0, hits = 0, misses = 0, hit_tokens = 0, prompt_tokens = 0;
  double token_hit_rate = 0, cacheable_token_hit_rate = 0, saved_prefill_gpu_s = 0;
  std::int64_t inserted_blocks = 0, evicted_blocks = 0, lost_blocks = 0, resident_bytes_at_end = 0;
  std::optional<Tier> host_tier;     ///< host offload on
  std::optional<Tier> ssd_tier;      ///< the SSD tier on
  std::optional<Tier> storage_tier;  ///< the storage-node tier on
};

/// Preemption over a run (sim::PreemptionStats), with the GPU time its recomputes took.
struct PreemptionUse {
  std::string mode;  ///< "recompute" or "swap"
  std::int64_t preemptions = 0, preempted_requests = 0, recomputes = 0, recompute_tokens = 0,
               recompute_cached_tokens = 0, swap_outs = 0, swap_out_bytes = 0, swap_ins = 0,
               swap_in_bytes = 0, swap_fallbacks = 0, swapped_peak_bytes = 0;
  double recompute_gpu_s = 0;
};

struct SloViolations {
  std::int64_t ttft = 0, e2e = 0;
};

/// One deployment's part of a run (scenarios that serve several models).
struct DeploymentUse {
  std::string model;
  RequestCounts requests;
  double goodput_tokens_per_s = 0;
  Distribution ttft, e2e, tpot;
  std::int64_t recoveries = 0, migrations = 0, failed_moves = 0, unfinished_moves = 0;
  std::map<std::string, std::int64_t> by_strategy;  ///< done moves by executed strategy
  std::optional<std::int64_t> handoffs;             ///< a deployment with a prefill pool
  Distribution recovery;
  std::optional<Distribution> handoff;  ///< a deployment with a prefill pool
  Quality quality;                      ///< of its moves, with its own methods' sources
  std::optional<SloViolations> slo;     ///< the scenario sets an SLO
};

/// The busiest link direction's utilisation at each sampling instant that carried traffic
/// (links.csv reduced to one value per instant). A long run samples millions of instants; at
/// most kMaxBusiestLinkPoints are kept, each the peak of its span of time (a busy moment stays
/// visible), placed at the span's first sample.
struct BusiestLink {
  std::vector<double> t_s, utilisation;
};
inline constexpr std::size_t kMaxBusiestLinkPoints = 2000;

/// Everything summary.json says about one strategy's run.
struct StrategyMetrics {
  RequestCounts requests;
  double goodput_tokens_per_s = 0;
  Distribution ttft, e2e, tpot;
  MoveCounts moves;
  Distribution recovery, recovery_stall, migration;
  /// Every move together (recoveries, migrations and handoffs): what the run's answer ranks.
  /// An older summary has none (count 0).
  Distribution all_moves;
  std::optional<Distribution> handoff;  ///< disaggregated serving only
  ByteCounts bytes;
  GpuSeconds gpu_time;
  ReplicaUse replicas;
  PredictorUse predictors;
  Quality quality;
  std::int64_t events = 0;
  std::optional<PrefixCacheUse> prefix_cache;  ///< prefix caching on
  std::optional<PreemptionUse> preemption;     ///< serving.preemption on
  /// Any copy crossed a host link (an older summary has none: read as absent).
  std::optional<HostLinkUse> host_links;
  std::optional<SloViolations> slo;         ///< the scenario sets an SLO
  std::optional<BusiestLink> busiest_link;  ///< asked for (the run's own summary.json)
  /// Each deployment's part, by name (a scenario with "deployments" only).
  std::map<std::string, DeploymentUse> deployments;
};

/// A strategy's metrics under its name.
struct NamedMetrics {
  std::string strategy;
  StrategyMetrics metrics;
};

/// The metrics of one strategy's run of `spec`; with `busiest_link`, also the series of the
/// busiest link's utilisation over time (a run's summary.json holds it for its report; sweep
/// points and the console leave it out).
StrategyMetrics strategy_metrics(const input::ScenarioSpec& spec, const sim::RunResult& run,
                                 bool busiest_link = false);

/// The strategy's entry of summary.json.
nlohmann::json to_json(const StrategyMetrics& m);

/// Reads an entry written by to_json; throws InputError naming the missing or mistyped key
/// (`where` is the entry's JSON pointer in its file, for the message).
StrategyMetrics from_json(const nlohmann::json& j, const std::string& where = "");

/// Sets a summary's "strategy_order" and "strategies" from `all` (in run order).
void put_strategies(nlohmann::json& summary, const std::vector<NamedMetrics>& all);

/// A summary's strategies in its strategy_order; throws InputError as from_json does.
std::vector<NamedMetrics> strategies_from_json(const nlohmann::json& summary);

/// The metrics of `strategy` in `all`, or nullptr.
const StrategyMetrics* find_strategy(const std::vector<NamedMetrics>& all,
                                     const std::string& strategy);

/// The value at a JSON pointer into the strategy's summary entry ("/recovery/p99_s"), as the
/// file writes it; empty where the entry has none (no recoveries: no p99). Sweep columns,
/// golden files and objectives name metrics by these pointers.
std::optional<nlohmann::json> metric_at(const StrategyMetrics& m, const std::string& pointer);

}  // namespace kvshift::reports
