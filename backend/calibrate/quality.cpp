// KV policy quality; see quality.hpp.
#include "backend/calibrate/quality.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

#include "backend/calibrate/gates.hpp"
#include "backend/calibrate/probe.hpp"
#include "backend/parallel.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/input_error.hpp"
#include "util/percentile.hpp"

namespace kvshift::backend::calibrate {
namespace {

using Kept = std::vector<std::vector<std::int64_t>>;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One row of the result before the requests are pooled: which policy, at which ratio.
struct RowPlan {
  std::size_t policy = 0;
  std::optional<double> retention;
};

/// What one request contributes.
struct RequestOutcome {
  double exact_mean = 0.0;
  std::vector<double> delta;   // per row
  std::vector<double> recall;  // per row (NaN: not measured)
  std::vector<double> top;     // per row: KVZip's top band kept (NaN: not measured)
  std::vector<Kept> kept;      // per row (keep_positions only)
  std::map<std::string, double> seconds;
};

/// Scores [layers·kv_heads, H−1] of a cheap pruning policy (snapkv, h2o, recent, random).
Matrix baseline_scores(PolicyKind kind, const RequestProbe& probe, const cost_model::ModelSpec& m,
                       std::int64_t keys, std::uint64_t seed) {
  const Eigen::Index rows = static_cast<Eigen::Index>(m.layers) * m.kv_heads;
  switch (kind) {
    case PolicyKind::kSnapKv:
      return snapkv_scores(probe.history_stats(), m);
    case PolicyKind::kH2o:
      return h2o_scores(probe.history_stats(), m);
    case PolicyKind::kRecent: {
      Matrix s(rows, keys);
      for (Eigen::Index t = 0; t < keys; ++t) s.col(t).setConstant(static_cast<float>(t));
      return s;
    }
    case PolicyKind::kRandom: {
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      Matrix s(rows, keys);
      for (Eigen::Index i = 0; i < s.size(); ++i) s.data()[i] = u(rng);
      return s;
    }
    default:
      throw std::logic_error("baseline_scores: not a baseline");
  }
}

void pool_row(QualityRow& row, const QualityResult& r, const QualityOptions& o) {
  row.mean = mean_of(row.per_request);
  const auto ci = bootstrap_interval(row.per_request, 0.95, o.resamples, o.seed);
  row.ci95_low = ci.first;
  row.ci95_high = ci.second;
  const int n = static_cast<int>(row.per_request.size());
  row.over_eps = count_over(row.per_request, o.eps);
  row.over_share = static_cast<double>(row.over_eps) / n;
  row.over_ci95_low = share_lower(row.over_eps, n, 0.975);
  row.over_ci95_high = share_upper(row.over_eps, n, 0.975);
  row.ppl = std::exp(r.exact_nll + row.mean);
}

}  // namespace

void check_quality_options(const QualityOptions& o, std::int64_t corpus_tokens) {
  if (o.history < kMinQualityHistory) {
    throw InputError("--history: " + std::to_string(o.history) + " tokens is too short (at least " +
                     std::to_string(kMinQualityHistory) +
                     ": the sinks and the recent window alone take " +
                     std::to_string(o.keep.sink_tokens + o.keep.recent_window) + ")");
  }
  if (o.eval < kMinQualityEval) {
    throw InputError("--eval: " + std::to_string(o.eval) + " tokens is too few for a per-request " +
                     "mean (at least " + std::to_string(kMinQualityEval) + ")");
  }
  if (o.windows < kMinQualityWindows) {
    throw InputError("--windows: " + std::to_string(o.windows) +
                     " requests are too few for an interval (at least " +
                     std::to_string(kMinQualityWindows) + ")");
  }
  if (o.retentions.empty()) throw InputError("--retention: give at least one ratio");
  for (double v : o.retentions) {
    if (!(v > 0.0 && v <= 1.0)) throw InputError("--retention: ratios must be in (0, 1]");
  }
  if (!(o.eps >= 0.0) || !std::isfinite(o.eps)) throw InputError("--eps: must be >= 0");
  if (o.resamples < kMinResamples) {
    throw InputError("--resamples: at least " + std::to_string(kMinResamples));
  }
  spread_windows(corpus_tokens, o.span, o.history + o.eval, o.windows);  // throws when too short
}

namespace {

/// A risk-kv policy's predictors in reconstruct()'s form and the first layer they rebuild.
struct RiskPlan {
  std::vector<GroupPredictor> predictors;
  int first_layer = 0;
};

/// What the policies ask of every request: the rows, and what to compute for them.
struct QualityPlan {
  std::vector<RowPlan> rows;
  bool stats = false;  ///< SnapKV / H2O statistics of the history
  bool kvzip = false;  ///< KVZip's scores (the reference of recall@K)
  std::vector<std::int32_t> kvzip_prompt;
  std::vector<int> resume = {0};    ///< layers the probe resumes from
  std::vector<RiskPlan> risk;       ///< per policy
  std::vector<std::string> labels;  ///< per policy: its method, numbered from the second on
};

QualityPlan plan_quality(const Model& target, const std::vector<KvPolicy>& policies,
                         const std::vector<PolicyInputs>& inputs, const QualityOptions& o) {
  const auto& m = target.spec();
  const std::int64_t targets = std::int64_t{m.layers} * m.kv_heads;
  QualityPlan q;
  q.risk.resize(policies.size());
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const KvPolicy& k = policies[p];
    if (!k.prunes()) {
      q.rows.push_back({p, std::nullopt});
    } else {
      for (double rho : o.retentions) q.rows.push_back({p, rho});
    }
    q.stats |= k.kind == PolicyKind::kSnapKv || k.kind == PolicyKind::kH2o;
    if (k.kind == PolicyKind::kKvzip) {
      q.kvzip = true;
      q.kvzip_prompt = inputs[p].kvzip_prompt;
      if (q.kvzip_prompt.empty()) {
        throw std::invalid_argument("run_quality: prune:kvzip needs its prompt");
      }
    }
    if (k.kind == PolicyKind::kProxyKv) {
      if (!inputs[p].proxy || !inputs[p].mapper) {
        throw std::invalid_argument("run_quality: prune:proxykv needs a proxy and a mapper");
      }
      check_mapper_fits(inputs[p].mapper->config(),
                        inputs[p].proxy->spec().layers * inputs[p].proxy->spec().q_heads,
                        static_cast<int>(targets), k.file);
    }
    if (k.kind == PolicyKind::kRiskKv) {
      if (inputs[p].predictors.empty()) {
        throw InputError(k.file + ": the topology omits no group: nothing to measure");
      }
      int first = m.layers;
      for (const auto& s : inputs[p].predictors) {
        first = std::min(first, s.predictor.target_layers.front());
        q.risk[p].predictors.push_back(s.predictor);
      }
      q.risk[p].first_layer = first;
      q.resume.push_back(first);
    }
  }
  // Two mappers (or two topologies) in one run: the later policies of a method get a suffix.
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const std::string method = method_name(policies[p].kind);
    const auto earlier =
        std::count_if(policies.begin(), policies.begin() + std::ssize(q.labels),
                      [&](const KvPolicy& k) { return method_name(k.kind) == method; });
    q.labels.push_back(earlier == 0 ? method : method + "-" + std::to_string(earlier + 1));
  }
  return q;
}

/// KVZip's scores of one request and what it keeps at each ratio and in its top band: the
/// reference of recall@K and of the top-band share.
struct KvzipReference {
  Matrix scores;
  std::vector<Kept> kept;  ///< per --retention ratio
  Kept top;                ///< its top kKvzipTopBand
};

KvzipReference kvzip_reference(const Model& target, std::span<const std::int32_t> context,
                               const RequestProbe& probe, const std::vector<std::int32_t>& prompt,
                               const QualityOptions& o, std::map<std::string, double>& seconds) {
  KvzipReference ref;
  KvCache copy = probe.exact_cache();
  const auto t0 = std::chrono::steady_clock::now();
  ref.scores = kvzip_scores(target, context, copy, prompt);
  seconds["kvzip_second_prefill"] = seconds_since(t0);
  for (double rho : o.retentions) {
    ref.kept.push_back(
        select_kept(ref.scores, {rho, o.keep.sink_tokens, o.keep.recent_window}, o.budget));
  }
  ref.top =
      select_kept(ref.scores, {kKvzipTopBand, o.keep.sink_tokens, o.keep.recent_window}, o.budget);
  return ref;
}

/// Policy `p`'s importance scores of one request [layers·kv_heads, H−1] (KVZip's, the proxy
/// and mapper's, or a baseline's), with the proxy's timings.
Matrix policy_scores(std::size_t p, const Model& target, std::span<const std::int32_t> context,
                     const RequestProbe& probe, const KvzipReference& ref, const QualityPlan& q,
                     const std::vector<KvPolicy>& policies, const std::vector<PolicyInputs>& inputs,
                     const QualityOptions& o, std::size_t w,
                     std::map<std::string, double>& seconds) {
  const PolicyKind kind = policies[p].kind;
  if (kind == PolicyKind::kKvzip) return ref.scores;
  if (kind == PolicyKind::kProxyKv) {
    const auto t0 = std::chrono::steady_clock::now();
    const Matrix x = proxy_features(*inputs[p].proxy, context, inputs[p].mapper->config().features,
                                    inputs[p].kvzip_prompt);
    // A second mapper's timings carry its label, so neither overwrites the other.
    const std::string of = q.labels[p] == "proxykv" ? "" : " (" + q.labels[p] + ")";
    seconds["proxy_prefill" + of] = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    Matrix scores = inputs[p].mapper->forward(x);
    seconds["mapper_forward" + of] = seconds_since(t1);
    return scores;
  }
  return baseline_scores(kind, probe, target.spec(), o.history - 1, o.seed * 1'000'003 + w);
}

/// One request (window `w` of the corpus, starting at `start`): every row's ΔNLL against the
/// exact cache, recall@K and the share of KVZip's top band kept, and the steps' timings.
RequestOutcome measure_request(const Model& target, std::span<const std::int32_t> corpus,
                               std::int64_t start, std::size_t w, const QualityPlan& q,
                               const std::vector<KvPolicy>& policies,
                               const std::vector<PolicyInputs>& inputs, const QualityOptions& o) {
  const auto& m = target.spec();
  const std::int64_t keys = o.history - 1;
  RequestOutcome out;
  const auto window =
      corpus.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(o.history + o.eval));
  const auto history = window.first(static_cast<std::size_t>(o.history));
  const auto context = history.first(static_cast<std::size_t>(keys));
  const RequestProbe probe(
      target, history, window.subspan(history.size()), q.resume,
      {.stats = {.mass = q.stats, .window_mass = q.stats, .window = o.snapkv_window}});
  out.seconds["target_prefill"] = probe.history_seconds();
  out.exact_mean = probe.exact_mean();
  const KvzipReference ref =
      q.kvzip ? kvzip_reference(target, context, probe, q.kvzip_prompt, o, out.seconds)
              : KvzipReference{};
  const std::vector<Kept>& kvzip_kept = ref.kept;
  const Kept& kvzip_top = ref.top;
  std::vector<std::optional<Matrix>> scores(policies.size());
  auto scores_of = [&](std::size_t p) -> const Matrix& {
    if (!scores[p]) {
      scores[p] =
          policy_scores(p, target, context, probe, ref, q, policies, inputs, o, w, out.seconds);
    }
    return *scores[p];
  };
  const std::vector<RowPlan>& plan = q.rows;
  out.delta.assign(plan.size(), 0.0);
  out.recall.assign(plan.size(), std::nan(""));
  out.top.assign(plan.size(), std::nan(""));
  if (o.keep_positions) out.kept.resize(plan.size());
  std::vector<double> eval_seconds;
  for (std::size_t r = 0; r < plan.size(); ++r) {
    const KvPolicy& k = policies[plan[r].policy];
    std::vector<double> nll;
    const auto t0 = std::chrono::steady_clock::now();
    if (k.kind == PolicyKind::kExact) {
      continue;
    } else if (k.kind == PolicyKind::kRiskKv) {
      const RiskPlan& rp = q.risk[plan[r].policy];
      KvCache c = probe.exact_cache();
      KvCache* one[] = {&c};
      reconstruct(rp.predictors, one, m);
      nll = probe.nll_with(std::move(c), rp.first_layer);
    } else {
      const double rho = *plan[r].retention;
      Kept kept = select_kept(scores_of(plan[r].policy),
                              {rho, o.keep.sink_tokens, o.keep.recent_window}, o.budget);
      if (q.kvzip) {
        const auto at = std::find(o.retentions.begin(), o.retentions.end(), rho);
        out.recall[r] = kept_recall(kept, kvzip_kept[at - o.retentions.begin()]);
        out.top[r] = reference_kept_share(kept, kvzip_top, keys, o.keep);
      }
      nll = probe.nll_with(o.budget == Budget::kGlobal
                               ? mask_pruned(probe.exact_cache(), kept, m.kv_heads)
                               : compact(probe.exact_cache(), kept, m.kv_heads, m.head_dim),
                           0);
      if (o.keep_positions) out.kept[r] = std::move(kept);
    }
    eval_seconds.push_back(seconds_since(t0));
    out.delta[r] = mean_of(nll) - out.exact_mean;
  }
  if (!eval_seconds.empty()) {
    std::sort(eval_seconds.begin(), eval_seconds.end());
    out.seconds["policy_eval"] = util::percentile(eval_seconds, 0.5);
  }
  return out;
}

/// The exact NLL, the steps' median timings and one pooled row per row plan.
void pool_requests(QualityResult& result, std::vector<RequestOutcome>& outcomes,
                   const QualityPlan& q, const std::vector<KvPolicy>& policies,
                   const QualityOptions& o) {
  for (const RequestOutcome& out : outcomes) result.exact_per_request.push_back(out.exact_mean);
  result.exact_nll = mean_of(result.exact_per_request);
  const auto ci = bootstrap_interval(result.exact_per_request, 0.95, o.resamples, o.seed);
  result.exact_ci95_low = ci.first;
  result.exact_ci95_high = ci.second;
  result.ppl_exact = std::exp(result.exact_nll);
  std::map<std::string, std::vector<double>> step_seconds;
  for (const RequestOutcome& out : outcomes) {
    for (const auto& [step, s] : out.seconds) step_seconds[step].push_back(s);
  }
  for (auto& [step, v] : step_seconds) {
    std::sort(v.begin(), v.end());
    result.timings_s[step] = util::percentile(v, 0.5);
  }
  const std::vector<RowPlan>& plan = q.rows;
  for (std::size_t r = 0; r < plan.size(); ++r) {
    const KvPolicy& k = policies[plan[r].policy];
    QualityRow row;
    row.policy = k.text;
    row.method = method_name(k.kind);
    row.label = q.labels[plan[r].policy];
    row.retention = plan[r].retention;
    std::vector<double> recalls, tops;
    for (RequestOutcome& out : outcomes) {
      row.per_request.push_back(out.delta[r]);
      if (!std::isnan(out.recall[r])) recalls.push_back(out.recall[r]);
      if (!std::isnan(out.top[r])) tops.push_back(out.top[r]);
      if (o.keep_positions) row.kept.push_back(std::move(out.kept[r]));
    }
    if (!recalls.empty()) row.recall = mean_of(recalls);
    if (!tops.empty()) row.kvzip_top_kept = mean_of(tops);
    pool_row(row, result, o);
    result.rows.push_back(std::move(row));
  }
}

/// Each pruning row's share of KVZip's quality recovered, against random and KVZip at the same
/// ratio; false when no row has both in the run.
bool add_kvzip_shares(QualityResult& result, const QualityOptions& o) {
  auto find_row = [&](const std::string& method, double rho) -> const QualityRow* {
    for (const QualityRow& row : result.rows) {
      if (row.method == method && row.retention == rho) return &row;
    }
    return nullptr;
  };
  bool any_share = false;
  auto note_once = [&](const std::string& note) {
    if (std::find(result.notes.begin(), result.notes.end(), note) == result.notes.end()) {
      result.notes.push_back(note);
    }
  };
  for (QualityRow& row : result.rows) {
    if (!row.retention) continue;
    const QualityRow* rnd = find_row("random", *row.retention);
    const QualityRow* kv = find_row("kvzip", *row.retention);
    if (!rnd || !kv) continue;
    any_share = true;
    std::ostringstream rho;
    rho << *row.retention;
    if (!(rnd->mean - kv->mean > 0.0)) {
      note_once("at ρ = " + rho.str() + " KVZip is no better than random on these requests: " +
                "the share of KVZip's quality recovered is undefined there");
      continue;
    }
    // The share divides by KVZip's gain over random: when that gain is not clearly above zero,
    // the share (and its interval) mostly measures the noise of the divisor.
    std::vector<double> gain(rnd->per_request.size());
    for (std::size_t i = 0; i < gain.size(); ++i)
      gain[i] = rnd->per_request[i] - kv->per_request[i];
    const auto [gain_lo, gain_hi] = bootstrap_interval(gain, 0.95, o.resamples, o.seed + 2);
    if (gain_lo <= 0.0) {
      std::ostringstream note;
      note << "at ρ = " << rho.str() << " KVZip's gain over random, " << rnd->mean - kv->mean
           << " nats/token [95 % CI " << gain_lo << ", " << gain_hi
           << "], is not clearly above zero: the share of KVZip's quality recovered divides by "
              "it and is unreliable there";
      note_once(note.str());
    }
    row.kvzip_share = (rnd->mean - row.mean) / (rnd->mean - kv->mean);
    const auto [lo, hi] = recovered_share_interval(rnd->per_request, row.per_request,
                                                   kv->per_request, o.resamples, o.seed + 1);
    row.kvzip_share_low = lo;
    row.kvzip_share_high = hi;
  }
  return any_share;
}

}  // namespace

QualityResult run_quality(const Model& target, std::span<const std::int32_t> corpus,
                          const std::vector<KvPolicy>& policies,
                          const std::vector<PolicyInputs>& inputs, const QualityOptions& o,
                          const ProgressFn& progress) {
  check_quality_options(o, static_cast<std::int64_t>(corpus.size()));
  if (policies.empty()) throw InputError("--policy: give at least one policy");
  if (inputs.size() != policies.size()) {
    throw std::invalid_argument("run_quality: one PolicyInputs per policy");
  }
  const QualityPlan q = plan_quality(target, policies, inputs, o);
  QualityResult result;
  result.options = o;
  result.starts = spread_windows(static_cast<std::int64_t>(corpus.size()), o.span,
                                 o.history + o.eval, o.windows);
  std::vector<RequestOutcome> outcomes(result.starts.size());
  std::mutex progress_mutex;
  std::int64_t done = 0;
  if (progress) progress("requests", 0, o.windows);
  parallel_for(result.starts.size(), o.threads, [&](std::size_t w) {
    outcomes[w] = measure_request(target, corpus, result.starts[w], w, q, policies, inputs, o);
    const std::lock_guard lock(progress_mutex);
    ++done;
    if (progress) progress("requests", done, o.windows);
  });
  pool_requests(result, outcomes, q, policies, o);
  const bool any_share = add_kvzip_shares(result, o);
  result.paired = paired_against_leader(result.rows, o.resamples, o.seed + 3);
  const bool prunes =
      std::any_of(policies.begin(), policies.end(), [](const KvPolicy& k) { return k.prunes(); });
  if (!any_share && prunes) {
    result.notes.push_back(
        "the share of KVZip's quality recovered needs prune:kvzip and prune:random in the run");
  }
  if (!q.kvzip && prunes) {
    result.notes.push_back("recall@K against KVZip needs prune:kvzip in the run");
  }
  return result;
}

}  // namespace kvshift::backend::calibrate
