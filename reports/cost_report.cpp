#include "reports/cost_report.hpp"

#include <cstdio>
#include <sstream>

#include "cost_model/storage.hpp"
#include "cost_model/units.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

json optional_bps(const std::optional<BitsPerSecond>& v) {
  return v ? json(v->value) : json(nullptr);
}

std::string row(const char* label, const std::string& value) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-34s %s\n", label, value.c_str());
  return buf;
}

std::string pct(double f) { return format_number("%.1f %%", 100.0 * f); }

}  // namespace

json cost_json(const cost_model::CostQuery& q, const cost_model::CostRecord& r) {
  const auto& s = r.storage;
  json omitted_layers = json::array(), groups = json::array(), group_ids = json::array();
  const int bp = cost_model::dtype_bytes(q.predictor_dtype);
  for (const auto& g : q.omission->groups()) {
    for (int l : g.target_layers) omitted_layers.push_back(l);
    group_ids.push_back(g.group);
    const std::int64_t params = cost_model::folded_params(*q.model, g);
    groups.push_back({{"group", g.group},
                      {"target_layers", g.target_layers},
                      {"anchor_layers", g.anchor_layers},
                      {"params", params},
                      {"bytes", params * bp},
                      {"unfolded_params", cost_model::unfolded_params(*q.model, g)}});
  }
  json out = {
      {"model", q.model->name},
      {"tokens", q.tokens},
      {"gpu", q.gpu ? json(q.gpu->name) : json(nullptr)},
      {"topology", q.omission->describe()},
      {"omitted_groups", group_ids},
      {"omitted_layers", omitted_layers},
      {"sink_rows", q.omission->sink_rows()},
      {"kv_dtype", cost_model::dtype_name(q.model->kv_dtype)},
      {"kv_bytes_full", s.kv_full.count},
      {"kv_bytes_saved", s.kv_saved.count},
      {"kv_bytes_kept", s.kv_kept.count},
      {"omitted_fraction", s.omitted_fraction},
      {"predictor",
       {{"dtype", cost_model::dtype_name(q.predictor_dtype)},
        {"params_total", s.predictor_params},
        {"bytes_per_group", s.predictor_bytes_per_group.count},
        {"bytes_total", s.predictor_bytes_total.count},
        {"unfolded_bytes_per_group", s.unfolded_bytes_per_group.count},
        {"groups", groups}}},
      {"sharing",
       {{"requests", s.sharing},
        {"net_saving_bytes", s.net_saving_bytes},
        {"break_even_requests", s.break_even_requests},
        {"predictor_to_saved_ratio", s.predictor_to_saved_ratio}}},
  };
  if (r.latency && q.path) {
    const auto& l = *r.latency;
    out["latency"] = {
        {"bandwidth_bps", q.path->bandwidth.value},
        {"latency_s", q.path->latency.value},
        {"prefill_s", l.prefill.value},
        {"reconstruct_s", l.reconstruct.value},
        {"risk_kv_with_predictor_s", l.risk_kv_with_predictor.value},
        {"proxy_retention", q.retention},
        {"hybrid_front_tokens", l.hybrid_front_tokens},
        {"held_tokens", q.held_tokens ? json(*q.held_tokens) : json(nullptr)},
        {"local_replay_s", l.local_replay.value},
        {"local_risk_kv_s", l.local_risk_kv.value},
        {"crossover_full_bps", optional_bps(l.crossover_full)},
        {"crossover_replay_bps", optional_bps(l.crossover_replay)},
        {"engine_setup_s", q.engine.setup.value},
        {"engine_per_block_s", q.engine.per_block.value},
        {"block_tokens", q.engine.block_tokens},
    };
    // "<strategy>_s" for every concrete strategy: null where it was not priced.
    for (const cost_model::Strategy st : cost_model::kConcreteStrategies) {
      out["latency"][std::string(cost_model::strategy_name(st)) + "_s"] =
          l.move.has(st) ? json(l.move.at(st).value) : json(nullptr);
    }
  }
  if (r.pd) {
    out["pd"] = {{"prefill_gpu", q.prefill_gpu},
                 {"prefill_s", r.pd->prefill_on_prefill_gpu.value},
                 {"ttft_decode_side_prefill_s", r.pd->decode_side_prefill.value}};
    for (const cost_model::Strategy st : cost_model::kConcreteStrategies) {
      if (!r.pd->ttft.has(st)) continue;
      out["pd"]["ttft_" + std::string(cost_model::strategy_name(st)) + "_s"] =
          r.pd->ttft.at(st).value;
    }
  }
  return out;
}

namespace {

/// The order of the latency table's strategy rows: every concrete strategy once.
constexpr cost_model::Strategy kLatencyRows[] = {
    cost_model::Strategy::kFullKv, cost_model::Strategy::kTokenReplay,
    cost_model::Strategy::kRiskKv, cost_model::Strategy::kProxyKv,
    cost_model::Strategy::kHybrid, cost_model::Strategy::kPrefixRecompute};
static_assert(
    [] {
      for (const cost_model::Strategy s : cost_model::kConcreteStrategies) {
        int n = 0;
        for (const cost_model::Strategy r : kLatencyRows) n += r == s ? 1 : 0;
        if (n != 1) return false;
      }
      return std::size(kLatencyRows) == std::size(cost_model::kConcreteStrategies);
    }(),
    "kLatencyRows lists every concrete strategy once");

/// A strategy's line in the latency table: its time and what it did.
void latency_row(std::ostringstream& o, const cost_model::CostQuery& q,
                 const cost_model::LatencyReport& l, cost_model::Strategy st) {
  using cost_model::Strategy;
  const Seconds t = l.move.at(st);
  switch (st) {
    case Strategy::kFullKv:
      o << row("full KV transfer", format_ms(t));
      return;
    case Strategy::kTokenReplay:
      o << row("token replay", format_ms(t) + "  (prefill " + format_ms(l.prefill) + ")");
      return;
    case Strategy::kRiskKv:
      o << row("RISK-KV, predictors resident",
               format_ms(t) + "  (reconstruct " + format_ms(l.reconstruct) + ")");
      return;
    case Strategy::kProxyKv: {
      char rho[64];
      std::snprintf(rho, sizeof rho, "ProxyKV pruned (rho = %.2f)", q.retention);
      o << row(rho, format_ms(t));
      return;
    }
    case Strategy::kHybrid: {
      const std::int64_t front = l.hybrid_front_tokens;
      const std::string split =
          front == 0 ? "all the KV shipped: full KV transfer"
          : front >= q.tokens
              ? "all " + std::to_string(front) + " tokens recomputed from their ids: token replay"
              : "the ids of the first " + std::to_string(front) +
                    " tokens sent first and recomputed, the KV of the rest shipped";
      o << row("hybrid (back shipped, front redone)", format_ms(t) + "  (" + split + ")");
      return;
    }
    case Strategy::kPrefixRecompute:
      o << row("prefix recompute, stale replica",
               format_ms(t) + "  (" + std::to_string(*q.held_tokens) +
                   " tokens' KV shipped, the ids of the other " +
                   std::to_string(q.tokens - *q.held_tokens) + " with it and recomputed)");
      return;
    case Strategy::kAdaptive:
      return;  // not a move of its own
  }
}

/// How the P/D table names a handoff strategy.
std::string handoff_name(cost_model::Strategy st) {
  switch (st) {
    case cost_model::Strategy::kFullKv:
      return "full KV";
    case cost_model::Strategy::kRiskKv:
      return "RISK-KV";
    case cost_model::Strategy::kProxyKv:
      return "ProxyKV";
    default:
      return cost_model::strategy_name(st);
  }
}

}  // namespace

std::string cost_table(const cost_model::CostQuery& q, const cost_model::CostRecord& r) {
  const auto& s = r.storage;
  std::ostringstream o;
  o << q.model->name << ", " << q.tokens << " tokens, topology " << q.omission->describe() << " ("
    << q.omission->omitted_layers() << " of " << q.model->layers << " layers omitted";
  if (q.omission->sink_rows() > 0) o << ", their first " << q.omission->sink_rows() << " rows sent";
  o << ")\n";
  o << "Storage per request\n";
  o << row("full KV", format_mib(s.kv_full));
  o << row("omitted (saved) KV", format_mib(s.kv_saved) + "  (" + pct(s.omitted_fraction) + ")");
  o << row("kept KV", format_mib(s.kv_kept));
  o << "Predictors (" << cost_model::dtype_name(q.predictor_dtype) << ", folded)\n";
  o << row("per group", format_mib(s.predictor_bytes_per_group));
  o << row("per group, unfolded ridge", format_mib(s.unfolded_bytes_per_group));
  o << row("total", format_mib(s.predictor_bytes_total));
  o << "Sharing\n";
  o << row("requests sharing one copy", std::to_string(s.sharing));
  o << row("net saving", format_mib(Bytes{s.net_saving_bytes}));
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, "%lld (predictor = %.3f x saved KV)",
                static_cast<long long>(s.break_even_requests), s.predictor_to_saved_ratio);
  o << row("break-even requests", s.break_even_requests ? ratio : "n/a (nothing omitted)");
  if (r.latency && q.path) {
    const auto& l = *r.latency;
    o << "Latency over " << format_bandwidth(q.path->bandwidth) << ", "
      << format_ms(q.path->latency) << " one way, on " << q.gpu->name << "\n";
    for (const cost_model::Strategy st : kLatencyRows) {
      if (l.move.has(st)) latency_row(o, q, l, st);
      if (st == cost_model::Strategy::kRiskKv) {
        o << row("RISK-KV, predictors shipped", format_ms(l.risk_kv_with_predictor));
      }
    }
    o << row("local recovery: replay", format_ms(l.local_replay));
    o << row("local recovery: RISK-KV", format_ms(l.local_risk_kv));
    const char* ideal = q.engine.ideal() ? "" : " (ideal link)";
    o << row((std::string("RISK-KV beats full transfer below") + ideal).c_str(),
             l.crossover_full ? format_bandwidth(*l.crossover_full) : "never");
    o << row((std::string("RISK-KV beats token replay above") + ideal).c_str(),
             l.crossover_replay ? format_bandwidth(*l.crossover_replay) : "never");
    if (!q.engine.ideal()) {
      o << row("transfer engine", format_ms(q.engine.setup) + " per transfer + " +
                                      format_ms(q.engine.per_block, 4) +
                                      " per descriptor, blocks of " +
                                      std::to_string(q.engine.block_tokens) + " tokens");
    }
  }
  if (r.pd) {
    o << "P/D handoff: TTFT = prefill on " << q.prefill_gpu << " ("
      << format_ms(r.pd->prefill_on_prefill_gpu) << ") + the move above\n";
    for (const cost_model::Strategy st : cost_model::kConcreteStrategies) {
      if (r.pd->ttft.has(st)) {
        o << row(("TTFT, " + handoff_name(st) + " handoff").c_str(), format_ms(r.pd->ttft.at(st)));
      }
    }
    o << row("TTFT, decode-side prefill", format_ms(r.pd->decode_side_prefill) + "  (no handoff)");
  }
  return o.str();
}

}  // namespace kvshift::reports
