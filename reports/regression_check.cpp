#include "reports/regression_check.hpp"

#include <cmath>
#include <cstdio>

#include "cost_model/input_error.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/units.hpp"
#include "reports/strategy_metrics.hpp"
#include "sim/serving/network_fabric.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

int node_index(const input::ScenarioSpec& spec, const std::string& name) {
  for (std::size_t i = 0; i < spec.cluster.nodes.size(); ++i) {
    if (spec.cluster.nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string fmt_ns(std::int64_t ns) {
  return format_number("%.9f s", static_cast<double>(ns) * 1e-9);
}

}  // namespace

std::int64_t closed_form_move_ns(const input::ScenarioSpec& spec, const sim::MoveRecord& m,
                                 const cost_model::ComputeCosts& compute) {
  // Re-plan the executed strategy from the record and price it with the cost model's
  // estimator on the uncontended route: the simulator's own cost object is not used.
  const sim::Topology topo = sim::build_topology(spec.cluster, spec.gpu.name);
  const int src = node_index(spec, m.source), dst = node_index(spec, m.to);
  const int pred = node_index(spec, m.predictor_source);
  // The methods of the request's deployment.
  const cost_model::MoveMethods methods =
      spec.deployments.empty()
          ? sim::move_methods(spec)
          : sim::move_methods(spec, spec.deployments[static_cast<std::size_t>(m.deployment)]);
  const cost_model::Strategy strategy =
      cost_model::strategy_named(m.strategy).value_or(cost_model::Strategy::kTokenReplay);
  const cost_model::MoveState state{
      m.context_tokens, m.available_tokens + m.front_tokens,
      src < 0 ? cost_model::SourceKv::kNone : cost_model::SourceKv::kFull, true,
      m.predictor_bytes == 0};
  cost_model::MovePlan plan = cost_model::plan_move(strategy, methods, state);
  const cost_model::PathFinder path_to = [&](int from, int to) -> std::optional<cost_model::Path> {
    const sim::Route* r = topo.route(static_cast<sim::NodeId>(from), static_cast<sim::NodeId>(to));
    if (!r) return std::nullopt;
    return cost_model::Path{topo.bottleneck(*r), r->latency.to_seconds()};
  };
  const cost_model::MoveRoute route =
      cost_model::make_route(plan, src, pred, dst, spec.gpu.host_link, path_to);
  plan = cost_model::balance_hybrid(std::move(plan), methods, route, 0, compute);
  const cost_model::MoveEstimate e = cost_model::estimate_move(plan, methods, route, 0, compute);
  return e.reachable ? e.total_ns() : -1;
}

CheckOutcome check_moves_exact(const input::ScenarioSpec& spec,
                               const std::vector<sim::RunResult>& runs,
                               const cost_model::ComputeCosts& compute) {
  CheckOutcome out;
  std::size_t checked = 0;
  for (const sim::RunResult& run : runs) {
    for (const sim::MoveRecord& m : run.moves) {
      if (m.outcome != sim::MoveOutcome::kDone) continue;
      ++checked;
      const std::int64_t expected = closed_form_move_ns(spec, m, compute);
      const std::int64_t got = m.end_ns - m.start_ns;
      if (got != expected) {
        out.ok = false;
        out.lines.push_back(run.strategy + ": request " + std::to_string(m.request) + " " +
                            m.strategy + " move took " + fmt_ns(got) + ", the cost model says " +
                            fmt_ns(expected));
      }
    }
  }
  if (checked == 0) {
    out.ok = false;
    out.lines.push_back("no move happened: an exact check needs at least one");
  } else if (out.ok) {
    out.lines.push_back(std::to_string(checked) +
                        " move(s) match the cost model to the nanosecond");
  }
  return out;
}

json golden_metrics(const json& summary) {
  static const char* kPaths[] = {
      "/requests/completed",   "/requests/failed",        "/moves/recoveries",
      "/moves/migrations",     "/recovery/p50_s",         "/recovery/p99_s",
      "/migration/p50_s",      "/migration/p99_s",        "/bytes/kv",
      "/bytes/replica_stream", "/gpu_time_s/reconstruct", "/gpu_time_s/replay",
      "/goodput_tokens_per_s"};
  json out = json::object();
  for (const NamedMetrics& n : strategies_from_json(summary)) {
    json m = json::object();
    for (const char* p : kPaths) {
      if (std::optional<json> v = metric_at(n.metrics, p)) m[p] = *v;
    }
    out[n.strategy] = m;
  }
  return out;
}

double golden_tolerance(const json& golden) {
  const auto it = golden.find("tolerance_rel");
  if (it == golden.end()) return 0.0;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    throw InputError("/tolerance_rel: must be a finite number >= 0 (got " + it->dump() + ")");
  }
  return it->get<double>();
}

CheckOutcome check_golden(const json& summary, const json& golden) {
  CheckOutcome out;
  if (!golden.is_object()) throw InputError("/: expected a JSON object");
  const double tol = golden_tolerance(golden);
  const auto all = golden.find("metrics");
  if (all == golden.end() || !all->is_object()) {
    throw InputError("/metrics: must be an object of strategies (got " +
                     (all == golden.end() ? std::string("nothing") : all->dump()) + ")");
  }
  for (const auto& [strategy, metrics] : all->items()) {
    if (!metrics.is_object()) throw InputError("/metrics/" + strategy + ": must be an object");
    for (const auto& [path, want] : metrics.items()) {
      if (!want.is_number()) {
        throw InputError("/metrics/" + strategy + "/" + path + ": must be a number (got " +
                         want.dump() + ")");
      }
    }
  }
  const json now = golden_metrics(summary);
  std::size_t compared = 0;
  for (const auto& [strategy, metrics] : all->items()) {
    if (!now.contains(strategy)) {
      out.ok = false;
      out.lines.push_back(strategy + ": missing from the run");
      continue;
    }
    for (const auto& [path, want] : metrics.items()) {
      ++compared;
      const json& got = now[strategy].value(path, json());
      const double w = want.get<double>(), g = got.is_number() ? got.get<double>() : NAN;
      const double diff = std::abs(g - w), bound = tol * std::max(std::abs(w), 1e-12);
      if (!(diff <= bound)) {
        out.ok = false;
        char line[256];
        std::snprintf(line, sizeof line, "%s %s: got %.9g, golden %.9g (tolerance %.3g %%)",
                      strategy.c_str(), path.c_str(), g, w, 100 * tol);
        out.lines.push_back(line);
      }
    }
  }
  if (out.ok)
    out.lines.push_back(std::to_string(compared) + " metrics within tolerance of the golden file");
  return out;
}

}  // namespace kvshift::reports
