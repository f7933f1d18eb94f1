#include "reports/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "reports/atomic_file.hpp"
#include "reports/record_csv.hpp"
#include "util/csv.hpp"
#include "util/percentile.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

double s_of(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// Rounds to the nanosecond so every file holds the same digits everywhere.
double r9(double v) { return std::round(v * 1e9) / 1e9; }

json distribution(std::vector<double> v) {
  json d = {{"count", v.size()}};
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d["mean_s"] = r9(sum / static_cast<double>(v.size()));
  static constexpr double kQs[] = {0.50, 0.90, 0.99, 1.0};
  const std::vector<double> p = util::nearest_rank_percentiles(v, kQs);
  d["p50_s"] = r9(p[0]);
  d["p90_s"] = r9(p[1]);
  d["p99_s"] = r9(p[2]);
  d["max_s"] = r9(p[3]);
  return d;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A latency the way a person reads it: ms below a second (µs-scale moves stay visible).
std::string fmt_latency(double s) {
  if (s < 0.01) return fmt("%.3f ms", s * 1e3);
  if (s < 1.0) return fmt("%.1f ms", s * 1e3);
  return fmt("%.3f s", s);
}

// Latency of moves of one kind: finished moves exactly, moves still open at the end
// as lower bounds (they took at least end − start), so a slow link cannot look fast.
json move_latency(std::vector<double> v, std::int64_t unfinished) {
  json d = distribution(std::move(v));
  d["unfinished"] = unfinished;
  if (unfinished > 0) d["includes_lower_bounds"] = true;
  return d;
}

// TTFT of every request that got a first token, and of those still waiting for one at the
// end as lower bounds (end − arrival), so a strategy whose requests never start cannot look fast.
json ttft_distribution(const sim::RunTally& t, std::int64_t end_ns) {
  if (t.ttft_open_arrival_s.empty()) return distribution(t.ttft_s);
  std::vector<double> v = t.ttft_s;
  for (double a : t.ttft_open_arrival_s) v.push_back(s_of(end_ns) - a);
  json d = distribution(std::move(v));
  d["without_first_token"] = t.ttft_open_arrival_s.size();
  d["includes_lower_bounds"] = true;
  return d;
}

json strategy_summary(const sim::ScenarioSpec& spec, const sim::RunResult& run) {
  const sim::RunTally& t = run.tally;
  std::int64_t ttft_violations = 0, e2e_violations = 0;
  if (spec.slo.ttft) {
    for (double v : t.ttft_s) ttft_violations += v > spec.slo.ttft->value;
  }
  if (spec.slo.e2e) {
    for (double v : t.e2e_s) e2e_violations += v > spec.slo.e2e->value;
  }
  const std::int64_t ok_moves = t.recoveries + t.migrations + t.handoffs;
  std::int64_t uses = 0;
  for (const auto& [node, n] : run.predictor_uses) uses += n;
  json j = {
      {"requests",
       {{"arrived", t.arrived},
        {"completed", t.completed},
        {"failed", t.failed},
        {"unfinished", t.unfinished}}},
      {"goodput_tokens_per_s", r9(static_cast<double>(t.output_tokens) / s_of(run.duration_ns))},
      {"ttft", ttft_distribution(t, run.duration_ns)},
      {"e2e", distribution(t.e2e_s)},
      {"tpot", distribution(t.tpot_s)},
      {"moves",
       {{"recoveries", t.recoveries},
        {"migrations", t.migrations},
        {"failed", t.failed_moves},
        {"cancelled", t.cancelled_moves},
        {"unfinished", t.open_recoveries + t.open_migrations + t.open_handoffs},
        {"fallbacks", t.fallbacks},
        {"by_strategy", t.by_strategy}}},
      {"recovery", move_latency(t.recovery_s, t.open_recoveries)},
      {"recovery_stall", move_latency(t.recovery_stall_s, t.open_recoveries)},
      {"migration", move_latency(t.migration_s, t.open_migrations)},
      {"bytes",
       {{"kv", run.bytes.kv},
        {"replica_stream", run.bytes.replica_stream},
        {"predictors", run.bytes.predictors},
        {"tokens", run.bytes.tokens}}},
      {"gpu_time_s",
       {{"prefill", r9(s_of(run.gpu_time.prefill))},
        {"decode", r9(s_of(run.gpu_time.decode))},
        {"reconstruct", r9(s_of(run.gpu_time.reconstruct))},
        {"replay", r9(s_of(run.gpu_time.replay))},
        {"proxy_scoring", r9(s_of(run.gpu_time.proxy_scoring))}}},
      {"replicas",
       {{"peak_bytes", run.replica_bytes_held_peak},
        {"full_equivalent_bytes", run.replica_bytes_full_equiv},
        {"saved_bytes", run.replica_bytes_full_equiv - run.replica_bytes_held_peak},
        {"room_peak_share", r9(run.replica_room_peak_share)},
        {"unprotected_requests", run.unprotected}}},
      {"predictors",
       {{"copies", run.predictor_copies},
        {"bytes_resident", run.predictor_bytes_resident},
        {"uses", uses},
        {"requests_per_copy",
         run.predictor_copies ? r9(static_cast<double>(uses) / run.predictor_copies) : 0.0},
        {"batched_reconstructions", run.gpu_time.batched_reconstructions}}},
      {"quality",
       {{"lossy_moves", t.lossy},
        {"delta_nll_mean_per_move", ok_moves ? r9(t.delta_nll_sum / ok_moves) : 0.0}}},
      {"events", run.events},
  };
  if (spec.serving.prefix_cache.enabled) {
    const sim::PrefixCacheStats& c = run.prefix_cache;
    const auto share = [](std::int64_t a, std::int64_t b) {
      return b > 0 ? r9(static_cast<double>(a) / static_cast<double>(b)) : 0.0;
    };
    j["prefix_cache"] = {{"prefills", c.prefills},
                         {"lookups", c.lookups},
                         {"hits", c.hits},
                         {"misses", c.lookups - c.hits},
                         {"hit_tokens", c.hit_tokens},
                         {"prompt_tokens", c.prompt_tokens},
                         {"token_hit_rate", share(c.hit_tokens, c.prompt_tokens)},
                         {"cacheable_token_hit_rate", share(c.hit_tokens, c.lookup_tokens)},
                         {"saved_prefill_gpu_s", r9(s_of(c.saved_prefill_ns))},
                         {"inserted_blocks", c.inserted_blocks},
                         {"evicted_blocks", c.evicted_blocks},
                         {"lost_blocks", c.lost_blocks},
                         {"resident_bytes_at_end", c.resident_bytes}};
    if (spec.serving.prefix_cache.host_offload) {
      const sim::PrefixCacheStats::HostTier& h = c.host;
      j["prefix_cache"]["host_tier"] = {{"hits", h.hits},
                                        {"hit_tokens", h.hit_tokens},
                                        {"read_bytes", h.read_bytes},
                                        {"written_blocks", h.written_blocks},
                                        {"written_bytes", h.written_bytes},
                                        {"evicted_blocks", h.evicted_blocks},
                                        {"lost_blocks", h.lost_blocks},
                                        {"resident_bytes_at_end", h.resident_bytes},
                                        {"peak_bytes", h.peak_bytes}};
    }
  }
  if (sim::disaggregated(spec)) {
    j["moves"]["handoffs"] = t.handoffs;
    j["handoff"] = move_latency(t.handoff_s, t.open_handoffs);
  }
  if (spec.slo.ttft || spec.slo.e2e) {
    j["slo"] = {{"ttft_violations", ttft_violations}, {"e2e_violations", e2e_violations}};
  }
  if (spec.proxy_kv) {
    j["quality"]["proxy_kv_delta_nll"] = spec.proxy_kv->delta_nll;
    j["quality"]["proxy_kv_delta_nll_source"] = spec.proxy_kv->delta_nll_source;
  }
  if (spec.risk_kv && spec.risk_kv->violation_share) {
    // The calibration's held-out share of requests over its ε, applied to the rebuilds made.
    const auto risk = t.by_strategy.find("risk_kv");
    const std::int64_t rebuilt = risk != t.by_strategy.end() ? risk->second : 0;
    j["quality"]["risk_kv_moves"] = rebuilt;
    j["quality"]["expected_requests_over_eps"] = r9(*spec.risk_kv->violation_share * rebuilt);
    j["quality"]["over_eps_source"] = "test-set violation share " +
                                      fmt("%.4f", *spec.risk_kv->violation_share) + " of " +
                                      spec.risk_kv->topology_source;
  }
  return j;
}

std::string requests_csv(const std::vector<sim::RunResult>& runs) {
  std::string o = requests_csv_header();
  for (const sim::RunResult& run : runs) {
    for (const sim::RequestRecord& r : run.requests) append_request_row(o, run.strategy, r);
  }
  return o;
}

std::string recoveries_csv(const std::vector<sim::RunResult>& runs) {
  std::string o = recoveries_csv_header();
  for (const sim::RunResult& run : runs) {
    for (const sim::MoveRecord& m : run.moves) append_move_row(o, run.strategy, m);
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
      o << run.strategy << ',' << fmt("%.9f", s_of(s.t_ns)) << ',' << util::csv_escape(s.link)
        << ',' << fmt("%.6f", s.utilisation) << ',' << s.bytes << ','
        << fmt("%.17g", s.capacity_bps) << '\n';
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

// The run's answer in one sentence: the strategy with the fewest failed requests and
// then the lowest p99 of the moves that happened (recoveries, else migrations).
std::string answer(const json& strategies, const json& order) {
  const char* kind = nullptr;
  // Disaggregated, every request's KV moves once and the handoff lands in its TTFT.
  for (const auto& n : order) {
    if (strategies[n.get<std::string>()].contains("handoff")) kind = "ttft";
  }
  for (const char* k : {"recovery", "migration"}) {
    if (kind) break;
    for (const auto& n : order) {
      if (strategies[n.get<std::string>()][k]["count"].get<std::int64_t>() > 0) kind = k;
    }
  }
  if (!kind)
    return "No moves happened in this run: the strategies differ only in what they stream.";
  struct Entry {
    std::string name;
    std::int64_t failed;
    double p99;
  };
  std::vector<Entry> ranked;
  for (const auto& n : order) {
    const json& s = strategies[n.get<std::string>()];
    if (s[kind]["count"].get<std::int64_t>() == 0) continue;
    ranked.push_back({n.get<std::string>(), s["requests"]["failed"].get<std::int64_t>(),
                      s[kind]["p99_s"].get<double>()});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Entry& a, const Entry& b) {
    return a.failed != b.failed ? a.failed < b.failed : a.p99 < b.p99;
  });
  const Entry& w = ranked.front();
  const std::string what = kind == std::string("ttft") ? "TTFT (handoff included)" : kind;
  std::string out = w.name + " wins on " + what + " p99: " + fmt_latency(w.p99);
  if (ranked.size() > 1) {
    const Entry& next = ranked[1];
    if (next.p99 - w.p99 <= 0.005 * next.p99) {
      out = w.name + " and " + next.name + " tie on " + what + " p99: " + fmt_latency(w.p99);
    } else {
      out += " against " + fmt_latency(next.p99) + " for " + next.name + " (" +
             fmt("%.0f", 100.0 * (next.p99 - w.p99) / next.p99) + " % lower)";
    }
    if (w.failed < next.failed) out += ", with fewer failed requests";
  }
  const json& ws = strategies[w.name];
  if (ws[kind].contains("unfinished") && ws[kind]["unfinished"].get<std::int64_t>() > 0) {
    out += "; " + std::to_string(ws[kind]["unfinished"].get<std::int64_t>()) + " of its " + kind +
           "s were unfinished at the end (counted at their lower bound)";
  }
  if (ws["moves"]["fallbacks"].get<std::int64_t>() > 0) {
    out += "; " + std::to_string(ws["moves"]["fallbacks"].get<std::int64_t>()) +
           " of its moves fell back to another strategy";
  }
  return out + ".";
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

json run_summary(const sim::ScenarioSpec& spec, const std::vector<sim::RunResult>& runs,
                 const std::vector<cost_model::OpSource>& costs) {
  json strategies = json::object(), order = json::array();
  for (const sim::RunResult& run : runs) {
    strategies[run.strategy] = strategy_summary(spec, run);
    order.push_back(run.strategy);
  }
  json j = {{"scenario", spec.name},
            {"answer", answer(strategies, order)},
            {"model", spec.model.name},
            {"gpu", spec.gpu.name},
            {"seed", spec.seed},
            {"duration_s", r9(spec.duration.value)},
            {"protection", sim::protection_name(spec.protection.mode)},
            {"cost_sources", cost_sources_json(costs)},
            {"strategy_order", order},
            {"strategies", strategies}};
  if (!spec.pools.empty()) {
    // A pool with its own GPU is priced by that GPU's roofline, not by cost_sources' GPU.
    json pools = json::array();
    for (std::size_t p = 0; p < spec.pools.size(); ++p) {
      std::int64_t gpus = 0;
      for (const sim::ClusterNode& n : spec.cluster.nodes) {
        if (n.kind == sim::NodeKind::kGpu && n.pool == static_cast<int>(p)) gpus += n.gpu_count;
      }
      const sim::PoolSpec& pool = spec.pools[p];
      pools.push_back(
          {{"name", pool.name},
           {"role", sim::pool_role_name(pool.role)},
           {"gpus", gpus},
           {"gpu", pool.gpu ? pool.gpu->name : spec.gpu.name},
           {"costs", pool.gpu ? "analytic (roofline of " + pool.gpu->name + ")" : "cost_sources"}});
    }
    j["pools"] = pools;
  }
  return j;
}

std::vector<std::filesystem::path> write_run_outputs(const std::filesystem::path& dir,
                                                     const sim::ScenarioSpec& spec,
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
  emit("summary", "summary.json", [&] { return run_summary(spec, runs, costs).dump(2) + "\n"; });
  emit("requests", "requests.csv", [&] { return requests_csv(runs); });
  emit("recoveries", "recoveries.csv", [&] { return recoveries_csv(runs); });
  emit("links", "links.csv", [&] { return links_csv(runs); });
  emit("trace", "trace.json", [&] { return trace_json(runs); });
  return written;
}

std::string run_table(const json& summary) {
  std::ostringstream o;
  char line[320];
  // Disaggregated runs lead with what the handoff changes: TTFT and the handoff itself.
  bool pd = false;
  for (const auto& n : summary["strategy_order"]) {
    pd |= summary["strategies"][n.get<std::string>()].contains("handoff");
  }
  const char* g1 = pd ? "ttft" : "recovery";
  const char* g2 = pd ? "handoff" : "migration";
  std::snprintf(line, sizeof line, "%-13s %9s %6s %6s %11s %11s %11s %11s %10s %10s %9s\n",
                "strategy", "completed", "failed", "moves", pd ? "TTFT p50" : "recov p50",
                pd ? "TTFT p99" : "recov p99", pd ? "handoff p50" : "migr p50",
                pd ? "handoff p99" : "migr p99", "KV moved", "GPU rebuild", "dNLL/move");
  o << line;
  std::vector<std::string> flags;
  for (const auto& name_json : summary["strategy_order"]) {
    const std::string name = name_json.get<std::string>();
    const json& s = summary["strategies"][name];
    auto p = [&](const char* group, const char* key) {
      if (!s[group].contains(key)) return std::string("-");
      const bool bound = s[group].value("includes_lower_bounds", false);
      return (bound ? ">" : "") + fmt_latency(s[group][key].get<double>());
    };
    const double rebuild =
        s["gpu_time_s"]["reconstruct"].get<double>() + s["gpu_time_s"]["replay"].get<double>();
    const std::string label =
        name +
        (s["moves"]["fallbacks"].get<long long>() + s["moves"]["unfinished"].get<long long>() > 0
             ? " *"
             : "");
    std::snprintf(
        line, sizeof line, "%-13s %9lld %6lld %6lld %11s %11s %11s %11s %6.1f MiB %9.3f s %9.5f\n",
        label.c_str(), s["requests"]["completed"].get<long long>(),
        s["requests"]["failed"].get<long long>(),
        s["moves"]["recoveries"].get<long long>() + s["moves"]["migrations"].get<long long>() +
            s["moves"].value("handoffs", 0LL),
        p(g1, "p50_s").c_str(), p(g1, "p99_s").c_str(), p(g2, "p50_s").c_str(),
        p(g2, "p99_s").c_str(), static_cast<double>(s["bytes"]["kv"].get<long long>()) / 1048576.0,
        rebuild, s["quality"]["delta_nll_mean_per_move"].get<double>());
    o << line;
    const long long fb = s["moves"]["fallbacks"].get<long long>();
    const long long open = s["moves"]["unfinished"].get<long long>();
    if (fb > 0)
      flags.push_back(name + ": " + std::to_string(fb) + " move(s) fell back to another strategy");
    if (open > 0) {
      flags.push_back(
          name + ": " + std::to_string(open) +
          " move(s) unfinished at the end; '>' marks latencies that include them as lower bounds");
    }
    if (const long long bare = s["replicas"].value("unprotected_requests", 0LL); bare > 0) {
      flags.push_back(name + ": " + std::to_string(bare) +
                      " request(s) found no node up with room for a replica in host memory (or "
                      "storage capacity) and ran unprotected until one had room");
    }
    if (s["ttft"].contains("without_first_token")) {
      flags.push_back(
          name + ": " + std::to_string(s["ttft"]["without_first_token"].get<long long>()) +
          " request(s) had no first token at the end; TTFT counts them at their lower bound");
    }
  }
  for (const std::string& f : flags) o << "  * " << f << "\n";
  for (const auto& name_json : summary["strategy_order"]) {
    const json& s = summary["strategies"][name_json.get<std::string>()];
    if (!s.contains("prefix_cache")) continue;
    const json& c = s["prefix_cache"];
    std::snprintf(line, sizeof line,
                  "prefix cache, %s: %.1f%% of prompt tokens reused (%lld of %lld lookups hit), "
                  "%.3f GPU-s of prefill saved (prefill(T) - extend(P, T - P) by the run's costs), "
                  "%lld blocks evicted\n",
                  name_json.get<std::string>().c_str(), 100 * c["token_hit_rate"].get<double>(),
                  c["hits"].get<long long>(), c["lookups"].get<long long>(),
                  c["saved_prefill_gpu_s"].get<double>(), c["evicted_blocks"].get<long long>());
    o << line;
    if (c.contains("host_tier")) {
      const json& h = c["host_tier"];
      std::snprintf(line, sizeof line,
                    "  host tier: %lld prefills loaded %lld tokens from host DRAM (%.1f GiB read, "
                    "%.1f GiB written through, not timed), %lld blocks evicted, peak %.1f GiB\n",
                    h["hits"].get<long long>(), h["hit_tokens"].get<long long>(),
                    static_cast<double>(h["read_bytes"].get<long long>()) / (1 << 30),
                    static_cast<double>(h["written_bytes"].get<long long>()) / (1 << 30),
                    h["evicted_blocks"].get<long long>(),
                    static_cast<double>(h["peak_bytes"].get<long long>()) / (1 << 30));
      o << line;
    }
  }
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
          add(fmt("spread (p90-p10)/median up to %.1f%%", 100 * v["spread"].get<double>()));
        }
        o << "  " << op << (text.empty() ? "" : ": " + text) << "\n";
      }
    }
  }
  o << summary["answer"].get<std::string>() << "\n";
  return o.str();
}

}  // namespace kvshift::reports
