// summary.json's per-strategy entries: StrategyMetrics to JSON and back (see
// strategy_metrics.hpp). Every per-strategy key of the file is spelt here and
// nowhere else. nlohmann::json objects keep their keys sorted, so the order
// keys are set in here does not show in the file.
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "reports/strategy_metrics.hpp"
#include "reports/summary_fields.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

json distribution_json(const Distribution& d) {
  json j = {{"count", d.count}};
  if (d.count > 0) {
    j["mean_s"] = d.mean_s;
    j["p50_s"] = d.p50_s;
    j["p90_s"] = d.p90_s;
    j["p99_s"] = d.p99_s;
    j["max_s"] = d.max_s;
  }
  if (d.unfinished) j["unfinished"] = *d.unfinished;
  if (d.without_first_token) j["without_first_token"] = *d.without_first_token;
  if (d.includes_lower_bounds) j["includes_lower_bounds"] = true;
  return j;
}

Distribution read_distribution(const Fields& f) {
  Distribution d;
  d.count = f.integer("count");
  if (d.count > 0) {
    d.mean_s = f.number("mean_s");
    d.p50_s = f.number("p50_s");
    d.p90_s = f.number("p90_s");
    d.p99_s = f.number("p99_s");
    d.max_s = f.number("max_s");
  }
  d.unfinished = f.optional_integer("unfinished");
  d.without_first_token = f.optional_integer("without_first_token");
  d.includes_lower_bounds = f.has("includes_lower_bounds") && f.flag("includes_lower_bounds");
  return d;
}

json quality_json(const Quality& q) {
  json j = {{"lossy_moves", q.lossy_moves}, {"delta_nll_mean_per_move", q.delta_nll_mean_per_move}};
  if (q.proxy_kv) {
    j["proxy_kv_delta_nll"] = q.proxy_kv->delta_nll;
    j["proxy_kv_delta_nll_source"] = q.proxy_kv->delta_nll_source;
    j["proxy_kv_moves"] = q.proxy_kv->moves;
    // null when unknown: a constant ΔNLL says nothing of how many requests exceed ε.
    j["proxy_kv_expected_requests_over_eps"] = q.proxy_kv->expected_requests_over_eps
                                                   ? json(*q.proxy_kv->expected_requests_over_eps)
                                                   : json(nullptr);
    j["proxy_kv_over_eps_source"] = q.proxy_kv->over_eps_source;
  }
  if (q.risk_kv_charge) {
    j["risk_kv_delta_nll"] = q.risk_kv_charge->delta_nll;
    j["risk_kv_delta_nll_source"] = q.risk_kv_charge->source;
  }
  if (q.risk_kv) {
    j["risk_kv_moves"] = q.risk_kv->moves;
    j["expected_requests_over_eps"] = q.risk_kv->expected_requests_over_eps;
    j["over_eps_source"] = q.risk_kv->over_eps_source;
  }
  return j;
}

Quality read_quality(const Fields& f) {
  Quality q;
  q.lossy_moves = f.integer("lossy_moves");
  q.delta_nll_mean_per_move = f.number("delta_nll_mean_per_move");
  if (f.has("proxy_kv_delta_nll")) {
    q.proxy_kv = Quality::ProxyKv{f.number("proxy_kv_delta_nll"),
                                  f.text("proxy_kv_delta_nll_source"), 0, std::nullopt, ""};
    if (f.has("proxy_kv_moves")) {  // an older summary has neither
      q.proxy_kv->moves = f.integer("proxy_kv_moves");
      q.proxy_kv->expected_requests_over_eps =
          f.optional_number("proxy_kv_expected_requests_over_eps");
      q.proxy_kv->over_eps_source = f.text("proxy_kv_over_eps_source");
    }
  }
  if (f.has("risk_kv_delta_nll")) {
    q.risk_kv_charge =
        Quality::Charge{f.number("risk_kv_delta_nll"), f.text("risk_kv_delta_nll_source")};
  }
  if (f.has("risk_kv_moves")) {
    q.risk_kv = Quality::RiskKv{f.integer("risk_kv_moves"), f.number("expected_requests_over_eps"),
                                f.text("over_eps_source")};
  }
  return q;
}

// `loses`: a node failure drops the tier's blocks (host DRAM), so it counts lost_blocks.
json tier_json(const PrefixCacheUse::Tier& t, bool loses) {
  json j = {{"hits", t.hits},
            {"hit_tokens", t.hit_tokens},
            {"read_bytes", t.read_bytes},
            {"written_blocks", t.written_blocks},
            {"written_bytes", t.written_bytes},
            {"evicted_blocks", t.evicted_blocks},
            {"resident_bytes_at_end", t.resident_bytes_at_end},
            {"peak_bytes", t.peak_bytes},
            {"move_loads", t.move_loads},
            {"move_tokens", t.move_tokens}};
  if (loses) j["lost_blocks"] = t.lost_blocks;
  return j;
}

PrefixCacheUse::Tier read_tier(const Fields& t, bool loses) {
  return {.hits = t.integer("hits"),
          .hit_tokens = t.integer("hit_tokens"),
          .read_bytes = t.integer("read_bytes"),
          .written_blocks = t.integer("written_blocks"),
          .written_bytes = t.integer("written_bytes"),
          .evicted_blocks = t.integer("evicted_blocks"),
          .lost_blocks = loses ? t.integer("lost_blocks") : 0,
          .resident_bytes_at_end = t.integer("resident_bytes_at_end"),
          .peak_bytes = t.integer("peak_bytes"),
          // Moves load from the tiers since 2026-12-04; an older summary's moves never did.
          .move_loads = t.optional_integer("move_loads").value_or(0),
          .move_tokens = t.optional_integer("move_tokens").value_or(0)};
}

json prefix_cache_json(const PrefixCacheUse& c) {
  json j = {{"prefills", c.prefills},
            {"lookups", c.lookups},
            {"hits", c.hits},
            {"misses", c.misses},
            {"hit_tokens", c.hit_tokens},
            {"prompt_tokens", c.prompt_tokens},
            {"token_hit_rate", c.token_hit_rate},
            {"cacheable_token_hit_rate", c.cacheable_token_hit_rate},
            {"saved_prefill_gpu_s", c.saved_prefill_gpu_s},
            {"inserted_blocks", c.inserted_blocks},
            {"evicted_blocks", c.evicted_blocks},
            {"lost_blocks", c.lost_blocks},
            {"resident_bytes_at_end", c.resident_bytes_at_end}};
  if (c.host_tier) j["host_tier"] = tier_json(*c.host_tier, true);
  if (c.ssd_tier) j["ssd_tier"] = tier_json(*c.ssd_tier, false);
  if (c.storage_tier) {
    j["storage_tier"] = tier_json(*c.storage_tier, true);
    j["storage_tier"]["failed_reads"] = c.storage_tier->failed_reads;
  }
  return j;
}

PrefixCacheUse read_prefix_cache(const Fields& f) {
  PrefixCacheUse c{f.integer("prefills"),
                   f.integer("lookups"),
                   f.integer("hits"),
                   f.integer("misses"),
                   f.integer("hit_tokens"),
                   f.integer("prompt_tokens"),
                   f.number("token_hit_rate"),
                   f.number("cacheable_token_hit_rate"),
                   f.number("saved_prefill_gpu_s"),
                   f.integer("inserted_blocks"),
                   f.integer("evicted_blocks"),
                   f.integer("lost_blocks"),
                   f.integer("resident_bytes_at_end"),
                   std::nullopt,
                   std::nullopt,
                   std::nullopt};
  if (f.has("host_tier")) c.host_tier = read_tier(f.object("host_tier"), true);
  if (f.has("ssd_tier")) c.ssd_tier = read_tier(f.object("ssd_tier"), false);
  if (f.has("storage_tier")) {
    c.storage_tier = read_tier(f.object("storage_tier"), true);
    c.storage_tier->failed_reads = f.object("storage_tier").integer("failed_reads");
  }
  return c;
}

json preemption_json(const PreemptionUse& p) {
  return {{"mode", p.mode},
          {"preemptions", p.preemptions},
          {"preempted_requests", p.preempted_requests},
          {"recomputes", p.recomputes},
          {"recompute_tokens", p.recompute_tokens},
          {"recompute_cached_tokens", p.recompute_cached_tokens},
          {"recompute_gpu_s", p.recompute_gpu_s},
          {"swap_outs", p.swap_outs},
          {"swap_out_bytes", p.swap_out_bytes},
          {"swap_ins", p.swap_ins},
          {"swap_in_bytes", p.swap_in_bytes},
          {"swap_fallbacks", p.swap_fallbacks},
          {"swapped_peak_bytes", p.swapped_peak_bytes}};
}

PreemptionUse read_preemption(const Fields& f) {
  return {f.text("mode"),
          f.integer("preemptions"),
          f.integer("preempted_requests"),
          f.integer("recomputes"),
          f.integer("recompute_tokens"),
          f.integer("recompute_cached_tokens"),
          f.integer("swap_outs"),
          f.integer("swap_out_bytes"),
          f.integer("swap_ins"),
          f.integer("swap_in_bytes"),
          f.integer("swap_fallbacks"),
          f.integer("swapped_peak_bytes"),
          f.number("recompute_gpu_s")};
}

json host_links_json(const HostLinkUse& h) {
  return {{"to_gpu_bytes", h.to_gpu_bytes},
          {"from_gpu_bytes", h.from_gpu_bytes},
          {"busy_s", h.busy_s},
          {"waited_s", h.waited_s},
          {"ssd_waited_s", h.ssd_waited_s}};
}

HostLinkUse read_host_links(const Fields& f) {
  return {f.integer("to_gpu_bytes"), f.integer("from_gpu_bytes"), f.number("busy_s"),
          f.number("waited_s"), f.number("ssd_waited_s")};
}

BusiestLink read_busiest_link(const Fields& f) {
  BusiestLink b{f.numbers("t_s"), f.numbers("utilisation")};
  if (b.t_s.size() != b.utilisation.size()) {
    f.fail("t_s and utilisation differ in length (" + std::to_string(b.t_s.size()) + " and " +
           std::to_string(b.utilisation.size()) + ")");
  }
  return b;
}

json requests_json(const RequestCounts& r) {
  return {{"arrived", r.arrived},
          {"completed", r.completed},
          {"failed", r.failed},
          {"unfinished", r.unfinished}};
}

RequestCounts read_requests(const Fields& r) {
  return {r.integer("arrived"), r.integer("completed"), r.integer("failed"),
          r.integer("unfinished")};
}

json slo_json(const SloViolations& v) {
  return {{"ttft_violations", v.ttft}, {"e2e_violations", v.e2e}};
}

SloViolations read_slo(const Fields& s) {
  return {s.integer("ttft_violations"), s.integer("e2e_violations")};
}

json deployment_json(const DeploymentUse& u) {
  json moves = {{"recoveries", u.recoveries},
                {"migrations", u.migrations},
                {"failed", u.failed_moves},
                {"unfinished", u.unfinished_moves},
                {"by_strategy", u.by_strategy}};
  if (u.handoffs) moves["handoffs"] = *u.handoffs;
  json j = {{"model", u.model},
            {"requests", requests_json(u.requests)},
            {"goodput_tokens_per_s", u.goodput_tokens_per_s},
            {"ttft", distribution_json(u.ttft)},
            {"e2e", distribution_json(u.e2e)},
            {"tpot", distribution_json(u.tpot)},
            {"moves", moves},
            {"recovery", distribution_json(u.recovery)},
            {"quality", quality_json(u.quality)}};
  if (u.handoff) j["handoff"] = distribution_json(*u.handoff);
  if (u.slo) j["slo"] = slo_json(*u.slo);
  return j;
}

DeploymentUse read_deployment(const Fields& f) {
  DeploymentUse u;
  u.model = f.text("model");
  u.requests = read_requests(f.object("requests"));
  u.goodput_tokens_per_s = f.number("goodput_tokens_per_s");
  u.ttft = read_distribution(f.object("ttft"));
  u.e2e = read_distribution(f.object("e2e"));
  u.tpot = read_distribution(f.object("tpot"));
  const Fields mv = f.object("moves");
  u.recoveries = mv.integer("recoveries");
  u.migrations = mv.integer("migrations");
  u.failed_moves = mv.integer("failed");
  u.unfinished_moves = mv.integer("unfinished");
  u.by_strategy = mv.counts("by_strategy");
  u.handoffs = mv.optional_integer("handoffs");
  u.recovery = read_distribution(f.object("recovery"));
  if (f.has("handoff")) u.handoff = read_distribution(f.object("handoff"));
  u.quality = read_quality(f.object("quality"));
  if (f.has("slo")) u.slo = read_slo(f.object("slo"));
  return u;
}

StrategyMetrics read_metrics(const Fields& f) {
  StrategyMetrics m;
  m.requests = read_requests(f.object("requests"));
  m.goodput_tokens_per_s = f.number("goodput_tokens_per_s");
  m.ttft = read_distribution(f.object("ttft"));
  m.e2e = read_distribution(f.object("e2e"));
  m.tpot = read_distribution(f.object("tpot"));
  const Fields mv = f.object("moves");
  m.moves = {mv.integer("recoveries"), mv.integer("migrations"),       mv.integer("failed"),
             mv.integer("cancelled"),  mv.integer("unfinished"),       mv.integer("fallbacks"),
             mv.counts("by_strategy"), mv.optional_integer("handoffs")};
  m.recovery = read_distribution(f.object("recovery"));
  m.recovery_stall = read_distribution(f.object("recovery_stall"));
  m.migration = read_distribution(f.object("migration"));
  if (f.has("all_moves")) m.all_moves = read_distribution(f.object("all_moves"));
  if (f.has("handoff")) m.handoff = read_distribution(f.object("handoff"));
  const Fields b = f.object("bytes");
  m.bytes = {b.integer("kv"), b.integer("replica_stream"), b.integer("predictors"),
             b.integer("tokens")};
  const Fields g = f.object("gpu_time_s");
  m.gpu_time = {g.number("prefill"), g.number("decode"), g.number("reconstruct"),
                g.number("replay"), g.number("proxy_scoring")};
  const Fields rp = f.object("replicas");
  m.replicas = {rp.integer("peak_bytes"), rp.integer("full_equivalent_bytes"),
                rp.integer("saved_bytes"), rp.number("room_peak_share"),
                rp.integer("unprotected_requests")};
  const Fields p = f.object("predictors");
  m.predictors = {p.integer("copies"),
                  p.integer("bytes_resident"),
                  p.integer("uses"),
                  p.number("requests_per_copy"),
                  p.integer("batched_reconstructions"),
                  p.has("bytes_unclaimed") ? p.integer("bytes_unclaimed") : 0};
  m.quality = read_quality(f.object("quality"));
  m.events = f.integer("events");
  if (f.has("prefix_cache")) m.prefix_cache = read_prefix_cache(f.object("prefix_cache"));
  if (f.has("preemption")) m.preemption = read_preemption(f.object("preemption"));
  if (f.has("host_links")) m.host_links = read_host_links(f.object("host_links"));
  if (f.has("slo")) m.slo = read_slo(f.object("slo"));
  if (f.has("deployments")) {
    const Fields ds = f.object("deployments");
    for (const std::string& name : ds.keys())
      m.deployments[name] = read_deployment(ds.object(name));
  }
  if (f.has("busiest_link")) m.busiest_link = read_busiest_link(f.object("busiest_link"));
  return m;
}

}  // namespace

json to_json(const StrategyMetrics& m) {
  const MoveCounts& mv = m.moves;
  json j = {
      {"requests", requests_json(m.requests)},
      {"goodput_tokens_per_s", m.goodput_tokens_per_s},
      {"ttft", distribution_json(m.ttft)},
      {"e2e", distribution_json(m.e2e)},
      {"tpot", distribution_json(m.tpot)},
      {"moves",
       {{"recoveries", mv.recoveries},
        {"migrations", mv.migrations},
        {"failed", mv.failed},
        {"cancelled", mv.cancelled},
        {"unfinished", mv.unfinished},
        {"fallbacks", mv.fallbacks},
        {"by_strategy", mv.by_strategy}}},
      {"recovery", distribution_json(m.recovery)},
      {"recovery_stall", distribution_json(m.recovery_stall)},
      {"migration", distribution_json(m.migration)},
      {"all_moves", distribution_json(m.all_moves)},
      {"bytes",
       {{"kv", m.bytes.kv},
        {"replica_stream", m.bytes.replica_stream},
        {"predictors", m.bytes.predictors},
        {"tokens", m.bytes.tokens}}},
      {"gpu_time_s",
       {{"prefill", m.gpu_time.prefill},
        {"decode", m.gpu_time.decode},
        {"reconstruct", m.gpu_time.reconstruct},
        {"replay", m.gpu_time.replay},
        {"proxy_scoring", m.gpu_time.proxy_scoring}}},
      {"replicas",
       {{"peak_bytes", m.replicas.peak_bytes},
        {"full_equivalent_bytes", m.replicas.full_equivalent_bytes},
        {"saved_bytes", m.replicas.saved_bytes},
        {"room_peak_share", m.replicas.room_peak_share},
        {"unprotected_requests", m.replicas.unprotected_requests}}},
      {"predictors",
       {{"copies", m.predictors.copies},
        {"bytes_resident", m.predictors.bytes_resident},
        {"uses", m.predictors.uses},
        {"requests_per_copy", m.predictors.requests_per_copy},
        {"batched_reconstructions", m.predictors.batched_reconstructions},
        {"bytes_unclaimed", m.predictors.bytes_unclaimed}}},
      {"quality", quality_json(m.quality)},
      {"events", m.events},
  };
  if (mv.handoffs) j["moves"]["handoffs"] = *mv.handoffs;
  if (m.handoff) j["handoff"] = distribution_json(*m.handoff);
  if (m.prefix_cache) j["prefix_cache"] = prefix_cache_json(*m.prefix_cache);
  if (m.preemption) j["preemption"] = preemption_json(*m.preemption);
  if (m.host_links) j["host_links"] = host_links_json(*m.host_links);
  if (m.slo) j["slo"] = slo_json(*m.slo);
  for (const auto& [name, u] : m.deployments) j["deployments"][name] = deployment_json(u);
  if (m.busiest_link) {
    j["busiest_link"] = {{"t_s", m.busiest_link->t_s},
                         {"utilisation", m.busiest_link->utilisation}};
  }
  return j;
}

StrategyMetrics from_json(const json& j, const std::string& where) {
  return read_metrics(Fields(j, where));
}

void put_strategies(json& summary, const std::vector<NamedMetrics>& all) {
  json order = json::array(), by_name = json::object();
  for (const NamedMetrics& n : all) {
    order.push_back(n.strategy);
    by_name[n.strategy] = to_json(n.metrics);
  }
  summary["strategy_order"] = order;
  summary["strategies"] = by_name;
}

std::vector<NamedMetrics> strategies_from_json(const json& summary) {
  const Fields top(summary, "");
  const Fields by_name = top.object("strategies");
  std::vector<NamedMetrics> out;
  for (const json& name : top.array("strategy_order")) {
    if (!name.is_string()) {
      throw InputError("/strategy_order: expected strategy names (got " + name.dump() + ")");
    }
    const std::string s = name.get<std::string>();
    out.push_back({s, read_metrics(by_name.object(s))});
  }
  return out;
}

const StrategyMetrics* find_strategy(const std::vector<NamedMetrics>& all,
                                     const std::string& strategy) {
  for (const NamedMetrics& n : all) {
    if (n.strategy == strategy) return &n.metrics;
  }
  return nullptr;
}

std::optional<json> metric_at(const StrategyMetrics& m, const std::string& pointer) {
  const json j = to_json(m);
  const json::json_pointer ptr(pointer);
  if (!j.contains(ptr)) return std::nullopt;
  return j[ptr];
}

}  // namespace kvshift::reports
