// StrategyMetrics from a run (see strategy_metrics.hpp): the tallies turned
// into counts, rounded distributions and shares once, for every writer and
// reader. The JSON side is strategy_metrics_json.cpp.
#include "reports/strategy_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "cost_model/units.hpp"
#include "util/percentile.hpp"

namespace kvshift::reports {
namespace {

double s_of(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

Distribution distribution(std::vector<double> v) {
  Distribution d;
  d.count = static_cast<std::int64_t>(v.size());
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean_s = r9(sum / static_cast<double>(v.size()));
  static constexpr double kQs[] = {0.50, 0.90, 0.99, 1.0};
  const std::vector<double> p = util::nearest_rank_percentiles(v, kQs);
  d.p50_s = r9(p[0]);
  d.p90_s = r9(p[1]);
  d.p99_s = r9(p[2]);
  d.max_s = r9(p[3]);
  return d;
}

// Latency of moves of one kind: finished moves exactly, moves still open at the end
// as lower bounds (they took at least end − start), so a slow link cannot look fast.
Distribution move_latency(std::vector<double> v, std::int64_t unfinished) {
  Distribution d = distribution(std::move(v));
  d.unfinished = unfinished;
  d.includes_lower_bounds = unfinished > 0;
  return d;
}

// TTFT of every request that got a first token, and of those still waiting for one at the
// end as lower bounds (end − arrival), so a strategy whose requests never start cannot look fast.
Distribution ttft_distribution(const sim::RunTally& t, std::int64_t end_ns) {
  if (t.ttft_open_arrival_s.empty()) return distribution(t.ttft_s);
  std::vector<double> v = t.ttft_s;
  for (double a : t.ttft_open_arrival_s) v.push_back(s_of(end_ns) - a);
  Distribution d = distribution(std::move(v));
  d.without_first_token = static_cast<std::int64_t>(t.ttft_open_arrival_s.size());
  d.includes_lower_bounds = true;
  return d;
}

PrefixCacheUse::Tier tier_use(const sim::PrefixCacheStats::Tier& t) {
  return {.hits = t.hits,
          .hit_tokens = t.hit_tokens,
          .read_bytes = t.read_bytes,
          .written_blocks = t.written_blocks,
          .written_bytes = t.written_bytes,
          .evicted_blocks = t.evicted_blocks,
          .lost_blocks = t.lost_blocks,
          .resident_bytes_at_end = t.resident_bytes,
          .peak_bytes = t.peak_bytes,
          .move_loads = t.move_loads,
          .move_tokens = t.move_tokens,
          .failed_reads = t.failed_reads};
}

PrefixCacheUse prefix_cache_use(const sim::PrefixCacheStats& c, const sim::PrefixCacheSpec& spec) {
  const auto share = [](std::int64_t a, std::int64_t b) {
    return b > 0 ? r9(static_cast<double>(a) / static_cast<double>(b)) : 0.0;
  };
  PrefixCacheUse u{c.prefills,
                   c.lookups,
                   c.hits,
                   c.lookups - c.hits,
                   c.hit_tokens,
                   c.prompt_tokens,
                   share(c.hit_tokens, c.prompt_tokens),
                   share(c.hit_tokens, c.lookup_tokens),
                   r9(s_of(c.saved_prefill_ns)),
                   c.inserted_blocks,
                   c.evicted_blocks,
                   c.lost_blocks,
                   c.resident_bytes,
                   std::nullopt,
                   std::nullopt,
                   std::nullopt};
  if (spec.host_offload) u.host_tier = tier_use(c.host);
  if (spec.ssd_tier) u.ssd_tier = tier_use(c.ssd);
  if (spec.storage_tier) u.storage_tier = tier_use(c.storage);
  return u;
}

std::int64_t done_with(const sim::RunTally& t, const char* strategy) {
  const auto it = t.by_strategy.find(strategy);
  return it != t.by_strategy.end() ? it->second : 0;
}

// ProxyKV's charge and its expected requests over ε: the measured share of requests over ε
// at ρ applied to the moves made, or unknown (never 0) when nothing measured it.
Quality::ProxyKv proxy_quality(const sim::ProxyKvSpec& p, const sim::RunTally& t) {
  Quality::ProxyKv q{p.delta_nll, p.delta_nll_source, done_with(t, "proxy_kv"), std::nullopt, ""};
  if (p.over_eps_share) {
    char text[96];
    std::snprintf(text, sizeof text, "measured share %.4f of requests over ε %g at ρ %g in ",
                  *p.over_eps_share, p.eps, p.retention);
    q.expected_requests_over_eps = r9(*p.over_eps_share * static_cast<double>(q.moves));
    q.over_eps_source = text + p.delta_nll_source.substr(0, p.delta_nll_source.find(')') + 1);
  } else {
    q.over_eps_source = "nothing measured the share of requests over ε for this ΔNLL";
  }
  return q;
}

// The quality of the moves in `t`, made with these methods (none: say nothing of them).
Quality quality(const std::optional<sim::RiskKvSpec>& risk_kv,
                const std::optional<sim::ProxyKvSpec>& proxy_kv, const sim::RunTally& t) {
  const std::int64_t ok_moves = t.recoveries + t.migrations + t.handoffs;
  Quality q{t.lossy, ok_moves ? r9(t.delta_nll_sum / ok_moves) : 0.0, std::nullopt, std::nullopt,
            std::nullopt};
  if (proxy_kv) q.proxy_kv = proxy_quality(*proxy_kv, t);
  if (risk_kv) q.risk_kv_charge = Quality::Charge{risk_kv->delta_nll, risk_kv->delta_nll_source};
  if (risk_kv && risk_kv->violation_share) {
    // The calibration's held-out share of requests over its ε, applied to the rebuilds made.
    const std::int64_t rebuilt = done_with(t, "risk_kv");
    q.risk_kv = Quality::RiskKv{rebuilt, r9(*risk_kv->violation_share * rebuilt),
                                "test-set violation share " +
                                    format_number("%.4f", *risk_kv->violation_share) + " of " +
                                    risk_kv->topology_source};
  }
  return q;
}

std::optional<SloViolations> slo_violations(const input::ScenarioSpec& spec,
                                            const sim::RunTally& t) {
  if (!spec.slo.ttft && !spec.slo.e2e) return std::nullopt;
  SloViolations v;
  if (spec.slo.ttft) {
    for (double x : t.ttft_s) v.ttft += x > spec.slo.ttft->value;
  }
  if (spec.slo.e2e) {
    for (double x : t.e2e_s) v.e2e += x > spec.slo.e2e->value;
  }
  return v;
}

// A deployment's part of the run, from the records it served.
DeploymentUse deployment_use(const input::ScenarioSpec& spec, const sim::DeploymentSpec& d,
                             const sim::RunTally& t, std::int64_t duration_ns) {
  DeploymentUse u;
  u.model = d.model.name;
  u.requests = {t.arrived, t.completed, t.failed, t.unfinished};
  u.goodput_tokens_per_s = r9(static_cast<double>(t.output_tokens) / s_of(duration_ns));
  u.ttft = ttft_distribution(t, duration_ns);
  u.e2e = distribution(t.e2e_s);
  u.tpot = distribution(t.tpot_s);
  u.recoveries = t.recoveries;
  u.migrations = t.migrations;
  u.failed_moves = t.failed_moves;
  u.unfinished_moves = t.open_recoveries + t.open_migrations + t.open_handoffs;
  u.by_strategy = t.by_strategy;
  u.recovery = move_latency(t.recovery_s, t.open_recoveries);
  const bool prefill_pool = std::any_of(d.pools.begin(), d.pools.end(), [&](int p) {
    return spec.pools[static_cast<std::size_t>(p)].role == sim::PoolRole::kPrefill;
  });
  if (prefill_pool) {
    u.handoffs = t.handoffs;
    u.handoff = move_latency(t.handoff_s, t.open_handoffs);
  }
  u.quality = quality(d.risk_kv, d.proxy_kv, t);
  u.slo = slo_violations(spec, t);
  return u;
}

// Samples come in time order, one per busy link direction per instant.
BusiestLink busiest_link(const std::vector<sim::LinkSample>& samples) {
  std::vector<std::pair<std::int64_t, double>> peaks;  // (t_ns, peak) per instant
  for (const sim::LinkSample& s : samples) {
    if (peaks.empty() || peaks.back().first != s.t_ns) peaks.emplace_back(s.t_ns, 0.0);
    peaks.back().second = std::max(peaks.back().second, s.utilisation);
  }
  BusiestLink out;
  const std::size_t n = peaks.size();
  std::size_t last_bin = n;  // none yet
  for (const auto& [t_ns, peak] : peaks) {
    std::size_t bin = out.t_s.size();
    if (n > kMaxBusiestLinkPoints) {
      const double span = static_cast<double>(peaks.back().first - peaks.front().first);
      bin = std::min(kMaxBusiestLinkPoints - 1,
                     static_cast<std::size_t>(static_cast<double>(t_ns - peaks.front().first) /
                                              span * kMaxBusiestLinkPoints));
    }
    const double u = std::round(peak * 1e6) / 1e6;  // links.csv's precision
    if (bin != last_bin) {
      out.t_s.push_back(r9(s_of(t_ns)));
      out.utilisation.push_back(u);
      last_bin = bin;
    } else {
      out.utilisation.back() = std::max(out.utilisation.back(), u);
    }
  }
  return out;
}

}  // namespace

double r9(double v) { return std::round(v * 1e9) / 1e9; }

namespace {

/// Moves by kind and outcome, and their latencies (unfinished ones at their lower bound).
void add_moves(const input::ScenarioSpec& spec, const sim::RunTally& t, StrategyMetrics& m) {
  m.moves = {t.recoveries,
             t.migrations,
             t.failed_moves,
             t.cancelled_moves,
             t.open_recoveries + t.open_migrations + t.open_handoffs,
             t.fallbacks,
             t.by_strategy,
             std::nullopt};
  m.recovery = move_latency(t.recovery_s, t.open_recoveries);
  m.recovery_stall = move_latency(t.recovery_stall_s, t.open_recoveries);
  m.migration = move_latency(t.migration_s, t.open_migrations);
  {
    std::vector<double> all = t.recovery_s;
    all.insert(all.end(), t.migration_s.begin(), t.migration_s.end());
    all.insert(all.end(), t.handoff_s.begin(), t.handoff_s.end());
    m.all_moves = move_latency(std::move(all), m.moves.unfinished);
  }
  if (sim::disaggregated(spec)) {
    m.moves.handoffs = t.handoffs;
    m.handoff = move_latency(t.handoff_s, t.open_handoffs);
  }
}

PredictorUse predictor_use(const sim::RunResult& run) {
  std::int64_t uses = 0;
  for (const auto& [node, n] : run.predictor_uses) uses += n;
  return {run.predictor_copies,
          run.predictor_bytes_resident,
          uses,
          run.predictor_copies ? r9(static_cast<double>(uses) / run.predictor_copies) : 0.0,
          run.gpu_time.batched_reconstructions,
          run.predictor_bytes_unclaimed};
}

PreemptionUse preemption_use(const sim::PreemptionSpec& pre, const sim::RunResult& run) {
  const sim::PreemptionStats& p = run.preemption;
  return PreemptionUse{sim::preemption_mode_name(pre.mode),
                       p.preemptions,
                       p.preempted_requests,
                       p.recomputes,
                       p.recompute_tokens,
                       p.recompute_cached_tokens,
                       p.swap_outs,
                       p.swap_out_bytes,
                       p.swap_ins,
                       p.swap_in_bytes,
                       p.swap_fallbacks,
                       p.swapped_peak_bytes,
                       r9(s_of(run.gpu_time.recompute))};
}

}  // namespace

StrategyMetrics strategy_metrics(const input::ScenarioSpec& spec, const sim::RunResult& run,
                                 bool with_busiest_link) {
  const sim::RunTally& t = run.tally;
  StrategyMetrics m;
  m.requests = {t.arrived, t.completed, t.failed, t.unfinished};
  m.goodput_tokens_per_s = r9(static_cast<double>(t.output_tokens) / s_of(run.duration_ns));
  m.ttft = ttft_distribution(t, run.duration_ns);
  m.e2e = distribution(t.e2e_s);
  m.tpot = distribution(t.tpot_s);
  add_moves(spec, t, m);
  m.bytes = {run.bytes.kv, run.bytes.replica_stream, run.bytes.predictors, run.bytes.tokens};
  const sim::GpuTime& g = run.gpu_time;
  m.gpu_time = {r9(s_of(g.prefill)), r9(s_of(g.decode)), r9(s_of(g.reconstruct)),
                r9(s_of(g.replay)), r9(s_of(g.proxy_scoring))};
  m.replicas = {run.replica_bytes_held_peak, run.replica_bytes_full_equiv,
                run.replica_bytes_full_equiv - run.replica_bytes_held_peak,
                r9(run.replica_room_peak_share), run.unprotected};
  m.predictors = predictor_use(run);
  // With several deployments each one's methods are in its own entry.
  static const std::optional<sim::RiskKvSpec> no_risk;
  static const std::optional<sim::ProxyKvSpec> no_proxy;
  const bool one_model = spec.deployments.empty();
  m.quality = quality(one_model ? spec.risk_kv : no_risk, one_model ? spec.proxy_kv : no_proxy, t);
  m.events = run.events;
  if (const sim::HostLinkStats& h = run.host_links; h.to_gpu_bytes + h.from_gpu_bytes > 0) {
    m.host_links = HostLinkUse{h.to_gpu_bytes, h.from_gpu_bytes, r9(s_of(h.busy_ns)),
                               r9(s_of(h.waited_ns)), r9(s_of(h.ssd_waited_ns))};
  }
  if (const auto& pre = spec.serving.preemption) m.preemption = preemption_use(*pre, run);
  if (spec.serving.prefix_cache.enabled) {
    m.prefix_cache = prefix_cache_use(run.prefix_cache, spec.serving.prefix_cache);
  }
  m.slo = slo_violations(spec, t);
  for (std::size_t d = 0; d < run.deployments.size() && d < spec.deployments.size(); ++d) {
    m.deployments[run.deployments[d].name] =
        deployment_use(spec, spec.deployments[d], run.deployments[d].tally, run.duration_ns);
  }
  if (with_busiest_link) m.busiest_link = busiest_link(run.link_samples);
  return m;
}

}  // namespace kvshift::reports
