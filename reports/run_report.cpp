#include "reports/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "cost_model/units.hpp"
#include "reports/atomic_file.hpp"
#include "reports/json_text.hpp"
#include "reports/record_csv.hpp"
#include "reports/run_answer.hpp"
#include "reports/strategy_metrics.hpp"
#include "util/csv.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

double s_of(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

std::string fmt_latency(double s) { return format_latency(s); }

DeploymentNames deployment_names(const std::vector<sim::RunResult>& runs) {
  DeploymentNames names;
  if (!runs.empty()) {
    for (const sim::RunResult::Deployment& d : runs.front().deployments) names.push_back(d.name);
  }
  return names;
}

std::string requests_csv(const std::vector<sim::RunResult>& runs) {
  const DeploymentNames names = deployment_names(runs);
  std::string o = requests_csv_header(names);
  for (const sim::RunResult& run : runs) {
    for (const sim::RequestRecord& r : run.requests) append_request_row(o, run.strategy, r, names);
  }
  return o;
}

std::string recoveries_csv(const std::vector<sim::RunResult>& runs) {
  const DeploymentNames names = deployment_names(runs);
  std::string o = recoveries_csv_header(names);
  for (const sim::RunResult& run : runs) {
    for (const sim::MoveRecord& m : run.moves) append_move_row(o, run.strategy, m, names);
  }
  return o;
}

std::string links_csv(const std::vector<sim::RunResult>& runs) {
  std::ostringstream o;
  o << "# one row per link direction that carried traffic in the interval; idle ones are left "
       "out\n";
  o << "strategy,t_s,link,utilisation,bytes,capacity_bps\n";
  for (const sim::RunResult& run : runs) {
    for (const sim::LinkSample& s : run.link_samples) {
      o << run.strategy << ',' << format_number("%.9f", s_of(s.t_ns)) << ','
        << util::csv_escape(s.link) << ',' << format_number("%.6f", s.utilisation) << ',' << s.bytes
        << ',' << format_number("%.17g", s.capacity_bps) << '\n';
    }
  }
  return o.str();
}

std::string trace_json(const std::vector<sim::RunResult>& runs) {
  json events = json::array();
  for (std::size_t p = 0; p < runs.size(); ++p) {
    const sim::RunResult& run = runs[p];
    const int pid = static_cast<int>(p) + 1;
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", run.strategy}}}});
    std::map<std::string, int> tids;
    auto tid = [&](const std::string& track) {
      auto [it, fresh] = tids.emplace(track, static_cast<int>(tids.size()) + 1);
      if (fresh) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", pid},
                          {"tid", it->second},
                          {"args", {{"name", track}}}});
      }
      return it->second;
    };
    for (const sim::TraceSpan& s : run.trace) {
      events.push_back({{"name", s.name},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", tid(s.track)},
                        {"ts", static_cast<double>(s.start_ns) / 1e3},
                        {"dur", static_cast<double>(s.duration_ns) / 1e3}});
    }
    for (const sim::MoveRecord& m : run.moves) {
      events.push_back(
          {{"name", std::string(sim::move_trigger_name(m.trigger)) + " " + m.strategy + " r" +
                        std::to_string(m.request)},
           {"ph", "X"},
           {"pid", pid},
           {"tid", tid("moves to " + m.to)},
           {"ts", static_cast<double>(m.start_ns) / 1e3},
           {"dur", static_cast<double>(m.end_ns - m.start_ns) / 1e3},
           {"args", {{"kv_bytes", m.kv_bytes}, {"outcome", sim::move_outcome_name(m.outcome)}}}});
    }
    std::size_t counters = 0;  // keeps trace.json openable: at most 200,000 counter events a run
    for (const sim::LinkSample& s : run.link_samples) {
      if (s.bytes == 0) continue;
      if (++counters > 200'000) break;
      events.push_back({{"name", "link " + s.link},
                        {"ph", "C"},
                        {"pid", pid},
                        {"ts", static_cast<double>(s.t_ns) / 1e3},
                        {"args", {{"utilisation", s.utilisation}}}});
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

// A latency distribution of a strategy by kind, with the word the console uses for it.
struct LatencyKind {
  const char* name;
  const Distribution* (*of)(const StrategyMetrics&);
};
constexpr LatencyKind kTtft{"ttft", [](const StrategyMetrics& m) { return &m.ttft; }};
constexpr LatencyKind kRecovery{"recovery", [](const StrategyMetrics& m) { return &m.recovery; }};
constexpr LatencyKind kMigration{"migration",
                                 [](const StrategyMetrics& m) { return &m.migration; }};
constexpr LatencyKind kHandoff{
    "handoff", [](const StrategyMetrics& m) { return m.handoff ? &*m.handoff : nullptr; }};

bool disaggregated(const std::vector<NamedMetrics>& all) {
  return std::any_of(all.begin(), all.end(),
                     [](const NamedMetrics& n) { return n.metrics.handoff.has_value(); });
}

// Where each method's ΔNLL per move comes from (the same for every strategy of a run), per
// deployment when the run serves several; then ProxyKV's expected requests over ε.
std::string delta_nll_lines(const std::vector<NamedMetrics>& all) {
  if (all.empty()) return "";
  auto charges = [](const Quality& q) {
    std::string out;
    if (q.risk_kv_charge) {
      out += format_number("risk_kv %.5f", q.risk_kv_charge->delta_nll) + ", " +
             q.risk_kv_charge->source;
    }
    if (q.proxy_kv) {
      out += (out.empty() ? "" : "; ") + format_number("proxy_kv %.5f", q.proxy_kv->delta_nll) +
             ", " + q.proxy_kv->delta_nll_source;
    }
    return out;
  };
  std::string out;
  const StrategyMetrics& first = all.front().metrics;
  if (const std::string c = charges(first.quality); !c.empty()) {
    out += "dNLL per move (nats/token): " + c + "\n";
  }
  for (const auto& [name, d] : first.deployments) {
    if (const std::string c = charges(d.quality); !c.empty()) {
      out += "dNLL per move, deployment " + name + ": " + c + "\n";
    }
  }
  for (const NamedMetrics& n : all) {
    const auto& p = n.metrics.quality.proxy_kv;
    if (!p || p->moves == 0) continue;
    out += "proxy_kv requests over eps, " + n.strategy + ": " +
           (p->expected_requests_over_eps
                ? format_number("%.1f", *p->expected_requests_over_eps) + " expected of " +
                      std::to_string(p->moves) + " moves (" + p->over_eps_source + ")"
                : std::string("unknown (") + p->over_eps_source + ")") +
           "\n";
  }
  return out;
}

}  // namespace

json cost_sources_json(const std::vector<cost_model::OpSource>& costs) {
  json out = json::object();
  for (const cost_model::OpSource& c : costs) {
    json j = {{"source", c.source}};
    if (c.measurements > 0) {
      j["live_measurements"] = c.measurements;
      j["spread"] = r9(c.spread);
    } else if (c.spread > 0) {
      j["spread"] = r9(c.spread);
    }
    out[c.op] = j;
  }
  return out;
}

json run_summary(const input::ScenarioSpec& spec, const std::vector<sim::RunResult>& runs,
                 const std::vector<cost_model::OpSource>& costs, bool busiest_link) {
  std::vector<NamedMetrics> strategies;
  for (const sim::RunResult& run : runs) {
    strategies.push_back({run.strategy, strategy_metrics(spec, run, busiest_link)});
  }
  json j = {{"scenario", spec.name},
            {"answer", run_answer(strategies).text},
            {"model", spec.model.name},
            {"gpu", spec.gpu.name},
            {"seed", spec.seed},
            {"duration_s", r9(spec.duration.value)},
            {"protection", sim::protection_name(spec.protection.mode)},
            {"cost_sources", cost_sources_json(costs)}};
  put_strategies(j, strategies);
  if (!spec.pools.empty()) {
    // A pool with its own GPU is priced by that GPU's roofline, not by cost_sources' GPU.
    json pools = json::array();
    for (std::size_t p = 0; p < spec.pools.size(); ++p) {
      std::int64_t gpus = 0;
      for (const sim::ClusterNode& n : spec.cluster.nodes) {
        if (n.kind == sim::NodeKind::kGpu && n.pool == static_cast<int>(p)) gpus += n.gpu_count;
      }
      const sim::PoolSpec& pool = spec.pools[p];
      json entry = {
          {"name", pool.name},
          {"role", sim::pool_role_name(pool.role)},
          {"gpus", gpus},
          {"gpu", pool.gpu ? pool.gpu->name : spec.gpu.name},
          {"costs", pool.gpu ? "analytic (roofline of " + pool.gpu->name + ")" : "cost_sources"}};
      for (const sim::DeploymentSpec& d : spec.deployments) {
        if (std::find(d.pools.begin(), d.pools.end(), static_cast<int>(p)) != d.pools.end()) {
          entry["deployment"] = d.name;
        }
      }
      pools.push_back(entry);
    }
    j["pools"] = pools;
  }
  if (!spec.deployments.empty()) {
    // Each deployment's model and share; its results are in each strategy's "deployments".
    json deployments = json::array();
    std::string models;
    for (const sim::DeploymentSpec& d : spec.deployments) {
      deployments.push_back({{"name", d.name}, {"model", d.model.name}, {"share", r9(d.share)}});
      models += (models.empty() ? "" : " + ") + d.model.name;
    }
    j["deployments"] = deployments;
    j["model"] = models;
  }
  return j;
}

std::vector<std::filesystem::path> write_run_outputs(const std::filesystem::path& dir,
                                                     const input::ScenarioSpec& spec,
                                                     const std::vector<sim::RunResult>& runs,
                                                     const std::vector<cost_model::OpSource>& costs,
                                                     const std::vector<std::string>& streamed) {
  std::vector<std::filesystem::path> written;
  // Each file is built only when the scenario asks for it (a year's trace is large).
  auto emit = [&](const char* key, const char* file, const auto& make_text) {
    const auto& files = spec.outputs.files;
    if (std::find(files.begin(), files.end(), key) == files.end()) return;
    if (std::find(streamed.begin(), streamed.end(), key) != streamed.end()) {
      written.push_back(dir / file);  // written as the run went
      return;
    }
    write_file_atomic(dir / file, make_text());
    written.push_back(dir / file);
  };
  emit("summary", "summary.json", [&] { return json_text(run_summary(spec, runs, costs, true)); });
  emit("requests", "requests.csv", [&] { return requests_csv(runs); });
  emit("recoveries", "recoveries.csv", [&] { return recoveries_csv(runs); });
  emit("links", "links.csv", [&] { return links_csv(runs); });
  emit("trace", "trace.json", [&] { return trace_json(runs); });
  return written;
}

namespace {

/// The table's header and one row per strategy, then the footnotes its '*' points to.
std::string strategy_rows(const std::vector<NamedMetrics>& strategies) {
  std::ostringstream o;
  char line[320];
  // Disaggregated runs lead with what the handoff changes: TTFT and the handoff itself.
  const bool pd = disaggregated(strategies);
  const LatencyKind& g1 = pd ? kTtft : kRecovery;
  const LatencyKind& g2 = pd ? kHandoff : kMigration;
  std::snprintf(line, sizeof line, "%-13s %9s %6s %6s %11s %11s %11s %11s %10s %10s %9s\n",
                "strategy", "completed", "failed", "moves", pd ? "TTFT p50" : "recov p50",
                pd ? "TTFT p99" : "recov p99", pd ? "handoff p50" : "migr p50",
                pd ? "handoff p99" : "migr p99", "KV moved", "GPU rebuild", "dNLL/move");
  o << line;
  std::vector<std::string> flags;
  for (const NamedMetrics& n : strategies) {
    const std::string& name = n.strategy;
    const StrategyMetrics& s = n.metrics;
    auto p = [&](const LatencyKind& kind, double Distribution::*stat) {
      const Distribution* d = kind.of(s);
      if (!d || d->count == 0) return std::string("-");
      return (d->includes_lower_bounds ? ">" : "") + fmt_latency(d->*stat);
    };
    const MoveCounts& mv = s.moves;
    const std::string label = name + (mv.fallbacks + mv.unfinished > 0 ? " *" : "");
    std::snprintf(line, sizeof line,
                  "%-13s %9lld %6lld %6lld %11s %11s %11s %11s %6.1f MiB %9.3f s %9.5f\n",
                  label.c_str(), static_cast<long long>(s.requests.completed),
                  static_cast<long long>(s.requests.failed),
                  static_cast<long long>(mv.recoveries + mv.migrations + mv.handoffs.value_or(0)),
                  p(g1, &Distribution::p50_s).c_str(), p(g1, &Distribution::p99_s).c_str(),
                  p(g2, &Distribution::p50_s).c_str(), p(g2, &Distribution::p99_s).c_str(),
                  static_cast<double>(s.bytes.kv) / 1048576.0,
                  s.gpu_time.reconstruct + s.gpu_time.replay, s.quality.delta_nll_mean_per_move);
    o << line;
    if (mv.fallbacks > 0) {
      flags.push_back(name + ": " + std::to_string(mv.fallbacks) +
                      " move(s) fell back to another strategy");
    }
    if (mv.unfinished > 0) {
      flags.push_back(
          name + ": " + std::to_string(mv.unfinished) +
          " move(s) unfinished at the end; '>' marks latencies that include them as lower bounds");
    }
    if (const std::int64_t bare = s.replicas.unprotected_requests; bare > 0) {
      flags.push_back(name + ": " + std::to_string(bare) +
                      " request(s) found no node up with room for a replica in host memory (or "
                      "storage capacity) and ran unprotected until one had room");
    }
    if (s.quality.delta_nll_mean_per_move < 0) {
      flags.push_back(name +
                      ": dNLL per move is below 0 as measured: no better than 0 beyond the "
                      "measurement's noise (its CI is on the dNLL per move line); it ranks as 0");
    }
    if (s.ttft.without_first_token) {
      flags.push_back(
          name + ": " + std::to_string(*s.ttft.without_first_token) +
          " request(s) had no first token at the end; TTFT counts them at their lower bound");
    }
  }
  for (const std::string& f : flags) o << "  * " << f << "\n";
  return o.str();
}

/// The prefix cache of each strategy that had one, a line per tier below HBM.
std::string prefix_cache_lines(const std::vector<NamedMetrics>& strategies) {
  std::ostringstream o;
  char line[320];
  for (const NamedMetrics& n : strategies) {
    if (!n.metrics.prefix_cache) continue;
    const PrefixCacheUse& c = *n.metrics.prefix_cache;
    std::snprintf(line, sizeof line,
                  "prefix cache, %s: %.1f%% of prompt tokens reused (%lld of %lld lookups hit), "
                  "%.3f GPU-s of prefill saved (prefill(T) - extend(P, T - P) by the run's costs), "
                  "%lld blocks evicted\n",
                  n.strategy.c_str(), 100 * c.token_hit_rate, static_cast<long long>(c.hits),
                  static_cast<long long>(c.lookups), c.saved_prefill_gpu_s,
                  static_cast<long long>(c.evicted_blocks));
    o << line;
    // One line per tier below HBM: `verb` how prefills take blocks from it, `fill` how blocks
    // reach it.
    auto tier_line = [&](const char* tier, const char* verb, const char* from, const char* fill,
                         const PrefixCacheUse::Tier& t) {
      std::snprintf(
          line, sizeof line,
          "  %s: %lld prefills %s %lld tokens and %lld moves %lld tokens from %s (%.1f "
          "GiB read, %.1f GiB %s), %lld blocks evicted, peak %.1f GiB\n",
          tier, static_cast<long long>(t.hits), verb, static_cast<long long>(t.hit_tokens),
          static_cast<long long>(t.move_loads), static_cast<long long>(t.move_tokens), from,
          static_cast<double>(t.read_bytes) / (1 << 30),
          static_cast<double>(t.written_bytes) / (1 << 30), fill,
          static_cast<long long>(t.evicted_blocks), static_cast<double>(t.peak_bytes) / (1 << 30));
      o << line;
    };
    if (c.host_tier) {
      tier_line("host tier", "loaded", "host DRAM", "written through over the host link",
                *c.host_tier);
    }
    if (c.ssd_tier) {
      tier_line("SSD tier", "read", "SSD", "written from host-tier evictions", *c.ssd_tier);
    }
    if (c.storage_tier) {
      tier_line("storage tier", "fetched", "the storage node",
                "sent from the nodes' evictions over the network", *c.storage_tier);
      if (const std::int64_t failed = c.storage_tier->failed_reads; failed > 0) {
        o << "    of those fetches, " << failed
          << " failed (the store or its path went down): their blocks were prefilled instead\n";
      }
    }
  }
  return o.str();
}

/// Host-link copies, for strategies whose copies waited 10 ms or more; preemption, where on.
std::string host_link_and_preemption_lines(const std::vector<NamedMetrics>& strategies) {
  std::ostringstream o;
  char line[320];
  for (const NamedMetrics& n : strategies) {
    // Said when copies waited 10 ms or more in the whole run; summary.json has every figure.
    if (!n.metrics.host_links ||
        n.metrics.host_links->waited_s + n.metrics.host_links->ssd_waited_s < 0.01) {
      continue;
    }
    const HostLinkUse& h = *n.metrics.host_links;
    std::snprintf(line, sizeof line,
                  "host links, %s: %.1f GiB to the GPUs and %.1f GiB from them, %.3f s of copies; "
                  "copies waited %.3f s for others on their link (SSD reads and writes %.3f s)\n",
                  n.strategy.c_str(), static_cast<double>(h.to_gpu_bytes) / (1 << 30),
                  static_cast<double>(h.from_gpu_bytes) / (1 << 30), h.busy_s, h.waited_s,
                  h.ssd_waited_s);
    o << line;
  }
  for (const NamedMetrics& n : strategies) {
    if (!n.metrics.preemption) continue;
    const PreemptionUse& p = *n.metrics.preemption;
    std::snprintf(line, sizeof line,
                  "preemption (%s), %s: %lld preemptions of %lld requests; %lld recomputed "
                  "(%lld tokens, %.3f GPU-s), %lld swapped out and %lld back in (%.1f GiB out, "
                  "peak %.1f GiB in host DRAM), %lld swaps recomputed instead\n",
                  p.mode.c_str(), n.strategy.c_str(), static_cast<long long>(p.preemptions),
                  static_cast<long long>(p.preempted_requests),
                  static_cast<long long>(p.recomputes), static_cast<long long>(p.recompute_tokens),
                  p.recompute_gpu_s, static_cast<long long>(p.swap_outs),
                  static_cast<long long>(p.swap_ins),
                  static_cast<double>(p.swap_out_bytes) / (1 << 30),
                  static_cast<double>(p.swapped_peak_bytes) / (1 << 30),
                  static_cast<long long>(p.swap_fallbacks));
    o << line;
  }
  return o.str();
}

/// One line per deployment and strategy, with what its moves ran.
std::string deployment_lines(const std::vector<NamedMetrics>& strategies) {
  std::ostringstream o;
  char line[320];
  for (const NamedMetrics& n : strategies) {
    for (const auto& [name, d] : n.metrics.deployments) {
      std::snprintf(line, sizeof line,
                    "deployment %s (%s), %s: %lld of %lld requests completed; TTFT p50 %s, "
                    "p99 %s; TPOT p50 %s; %lld recoveries (p99 %s), %lld migrations",
                    name.c_str(), d.model.c_str(), n.strategy.c_str(),
                    static_cast<long long>(d.requests.completed),
                    static_cast<long long>(d.requests.arrived),
                    d.ttft.count ? fmt_latency(d.ttft.p50_s).c_str() : "-",
                    d.ttft.count ? fmt_latency(d.ttft.p99_s).c_str() : "-",
                    d.tpot.count ? fmt_latency(d.tpot.p50_s).c_str() : "-",
                    static_cast<long long>(d.recoveries),
                    d.recovery.count ? fmt_latency(d.recovery.p99_s).c_str() : "-",
                    static_cast<long long>(d.migrations));
      o << line;
      // What its moves ran (adaptive picks per deployment).
      std::string ran;
      for (const auto& [strategy, count] : d.by_strategy)
        ran += (ran.empty() ? "" : ", ") + strategy + " " + std::to_string(count);
      o << (ran.empty() ? "" : " (moves ran " + ran + ")") << "\n";
    }
  }
  return o.str();
}

/// The pools, and where each op's GPU durations came from.
std::string pool_and_cost_lines(const json& summary) {
  std::ostringstream o;
  if (summary.contains("pools")) {
    o << "pools:";
    for (const json& p : summary["pools"]) {
      o << " " << p["name"].get<std::string>() << " (" << p["role"].get<std::string>() << ", "
        << p["gpus"].get<long long>() << " x " << p["gpu"].get<std::string>() << ")";
    }
    o << "; a pool with its own GPU is priced by that GPU's roofline\n";
  }
  if (summary.contains("cost_sources")) {
    // A source shared by every op is printed once; measurement counts and spreads per op.
    const json& c = summary["cost_sources"];
    std::string common = c.empty() ? "" : c.begin().value()["source"].get<std::string>();
    bool extras = false;
    for (const auto& [op, v] : c.items()) {
      if (v["source"] != common) common.clear();
      extras |= v.contains("spread") || v.contains("live_measurements");
    }
    if (!common.empty() && !extras) {
      o << "GPU durations: " << common << ", every op\n";
    } else {
      o << "GPU durations" << (common.empty() ? ":" : " from " + common + ":") << "\n";
      for (const auto& [op, v] : c.items()) {
        std::string text = common.empty() ? v["source"].get<std::string>() : "";
        auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
        if (v.contains("live_measurements")) {
          add(std::to_string(v["live_measurements"].get<long long>()) + " shapes measured");
        }
        if (v.contains("spread")) {
          add(format_number("spread (p90-p10)/median up to %.1f%%",
                            100 * v["spread"].get<double>()));
        }
        o << "  " << op << (text.empty() ? "" : ": " + text) << "\n";
      }
    }
  }
  return o.str();
}

}  // namespace

std::string run_table(const json& summary) {
  const std::vector<NamedMetrics> strategies = strategies_from_json(summary);
  return strategy_rows(strategies) + delta_nll_lines(strategies) + prefix_cache_lines(strategies) +
         host_link_and_preemption_lines(strategies) + deployment_lines(strategies) +
         pool_and_cost_lines(summary) + summary["answer"].get<std::string>() + "\n";
}

}  // namespace kvshift::reports
