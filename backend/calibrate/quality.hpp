// `kvshift quality`'s measurement: what a KV policy (kv_policy.hpp) costs in
// next-token NLL on real text. Each request is a window of H history + E eval
// tokens spread over a span of the corpus; its exact history KV is built once
// (RequestProbe, the same evaluation core `kvshift calibrate` uses), changed
// by each policy at each retention ratio, and the E tokens are teacher-forced
// on it. Per policy and ratio: mean ΔNLL with a 95 % bootstrap interval over
// requests, the share of requests over ε (Clopper–Pearson), PPL exact →
// policy, and for pruning policies the recall@K of the kept set against
// KVZip's, the share of KVZip's top 10 % it keeps, and the share of KVZip's
// quality recovered,
// (ΔNLL_random − ΔNLL_policy) / (ΔNLL_random − ΔNLL_kvzip), with a paired
// bootstrap interval. Writes no files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/calibrate/calibration.hpp"
#include "backend/calibrate/corpus.hpp"
#include "backend/calibrate/kv_policy.hpp"
#include "backend/calibrate/predictor_file.hpp"
#include "backend/model.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/pruning.hpp"

namespace kvshift::backend::calibrate {

/// The smallest measurement that still says something: a history long enough to hold the
/// forced tokens and something to choose, enough eval tokens for a per-request mean, enough
/// requests for an interval.
inline constexpr std::int64_t kMinQualityHistory = 64;
inline constexpr std::int64_t kMinQualityEval = 16;
inline constexpr int kMinQualityWindows = 8;

/// KVZip's "top band": its kept set at this ratio. Recall@K weighs every kept token alike;
/// whether a policy keeps the few tokens the oracle rates highest is a separate question.
inline constexpr double kKvzipTopBand = 0.1;

struct QualityOptions {
  std::int64_t history = 1024;  ///< H: tokens whose KV the policy changes (H−1 are cached)
  std::int64_t eval = 128;      ///< E: teacher-forced tokens read from the changed KV
  int windows = 32;
  CorpusSpan span;
  std::vector<double> retentions = {0.1, 0.2, 0.3, 0.5, 0.7};
  KeepPolicy keep;                   ///< sinks and recent window, always kept
  Budget budget = Budget::kPerHead;  ///< how each ratio's budget is split over the KV heads
  int snapkv_window = 32;  ///< SnapKV's observation window (the last queries of the history)
  double eps = 0.01;       ///< ΔNLL threshold of the "requests over ε" share (nats/token)
  std::uint64_t seed = 1;  ///< random policy and bootstrap
  int resamples = kMinResamples;
  int threads = 1;              ///< requests measured side by side
  bool keep_positions = false;  ///< keep every pruning row's kept positions (QualityRow::kept)
};

/// What one policy needs beyond the target model (set by the caller, in policy order).
struct PolicyInputs {
  const Model* proxy = nullptr;             ///< proxykv
  std::optional<HybridAxialMapper> mapper;  ///< proxykv
  std::vector<StoredPredictor> predictors;  ///< risk-kv
  double omitted_fraction = 0.0;            ///< risk-kv: omitted layers / layers
  std::vector<std::int32_t> kvzip_prompt;   ///< kvzip, and proxykv on repeat-pass features
};

/// One policy at one retention ratio (none for exact and risk-kv), over all requests.
struct QualityRow {
  std::string policy;  ///< as given
  std::string method;  ///< method_name
  std::string label;   ///< method, with "-2", "-3", … for a method's later policies (file names)
  std::optional<double> retention;
  std::vector<double> per_request;  ///< ΔNLL_r = mean NLL with the policy − exact, nats/token
  double mean = 0.0, ci95_low = 0.0, ci95_high = 0.0;
  int over_eps = 0;
  double over_share = 0.0, over_ci95_low = 0.0, over_ci95_high = 0.0;
  double ppl = 0.0;              ///< exp(mean NLL with the policy)
  std::optional<double> recall;  ///< mean recall@K against KVZip's kept set
  /// Mean share of KVZip's top kKvzipTopBand tokens per head (forced tokens left out) kept.
  std::optional<double> kvzip_top_kept;
  std::optional<double> kvzip_share;  ///< of KVZip's quality recovered (needs random + kvzip)
  double kvzip_share_low = 0.0, kvzip_share_high = 0.0;
  /// Kept positions per request, per layer·KV head (options.keep_positions only).
  std::vector<std::vector<std::vector<std::int64_t>>> kept;
  /// risk-kv: the digest ("fnv1a64:…") of the topology.json measured and the groups it omits,
  /// so a scenario that charges this row can check it charges the same topology.
  std::string topology_digest;
  std::vector<int> omitted_groups;
};

/// At one ratio, a method's ΔNLL minus the leader's, request by request: the leader is the
/// non-oracle method (not kvzip) with the lowest mean ΔNLL there. Paired, so the noise the
/// requests share cancels; a difference whose interval lies above zero is a clear loss.
struct PairedDifference {
  double retention = 0.0;
  std::string leader;  ///< its label
  std::string label;   ///< the method compared with it
  double mean = 0.0, ci95_low = 0.0, ci95_high = 0.0;
};

struct QualityResult {
  QualityOptions options;
  std::vector<std::int64_t> starts;       ///< each request's first corpus token
  std::vector<double> exact_per_request;  ///< mean exact NLL per request
  double exact_nll = 0.0, exact_ci95_low = 0.0, exact_ci95_high = 0.0, ppl_exact = 0.0;
  std::vector<QualityRow> rows;          ///< policy order, ratios ascending
  std::vector<PairedDifference> paired;  ///< every other row at each ratio against its leader
  /// Median wall seconds per request of each measured step (one core per request).
  std::map<std::string, double> timings_s;
  std::vector<std::string> notes;  ///< what a reader must know next to the numbers
};

/// Checks the options (InputError naming the flag): sizes above the minimums, ratios in (0, 1].
void check_quality_options(const QualityOptions& o, std::int64_t corpus_tokens);

/// Measures every policy. `inputs` has one entry per policy. Throws InputError.
QualityResult run_quality(const Model& target, std::span<const std::int32_t> corpus,
                          const std::vector<KvPolicy>& policies,
                          const std::vector<PolicyInputs>& inputs, const QualityOptions& options,
                          const ProgressFn& progress = {});

/// Recall of `kept` against `reference` (same rows): mean over rows of |kept ∩ ref| / |kept|.
double kept_recall(const std::vector<std::vector<std::int64_t>>& kept,
                   const std::vector<std::vector<std::int64_t>>& reference);

/// Share of `reference`'s positions that `kept` also holds, over all rows pooled, leaving out
/// the tokens `keep` forces (kept by every policy) of a `tokens`-long row; NaN when `reference`
/// holds nothing else.
double reference_kept_share(const std::vector<std::vector<std::int64_t>>& kept,
                            const std::vector<std::vector<std::int64_t>>& reference,
                            std::int64_t tokens, const KeepPolicy& keep);

/// The paired 95 % bootstrap interval over requests of the share of the oracle's quality a
/// policy recovers, (mean(random) − mean(policy)) / (mean(random) − mean(oracle)); a resample
/// where the oracle is no better than random counts as 0.
std::pair<double, double> recovered_share_interval(const std::vector<double>& random,
                                                   const std::vector<double>& policy,
                                                   const std::vector<double>& oracle, int resamples,
                                                   std::uint64_t seed);

/// Every row with a ratio, other than that ratio's leader, against the leader (the lowest mean
/// ΔNLL among rows whose method is not kvzip), with a paired 95 % bootstrap interval of the
/// mean difference; in row order. Ratios with no non-oracle row give nothing.
std::vector<PairedDifference> paired_against_leader(const std::vector<QualityRow>& rows,
                                                    int resamples, std::uint64_t seed);

}  // namespace kvshift::backend::calibrate
