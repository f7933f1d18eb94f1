#include "reports/regression_check.hpp"

#include <cmath>
#include <cstdio>

#include "cost_model/storage.hpp"
#include "sim/serving/network_fabric.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

int node_index(const sim::ScenarioSpec& spec, const std::string& name) {
  for (std::size_t i = 0; i < spec.cluster.nodes.size(); ++i) {
    if (spec.cluster.nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string fmt_ns(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9f s", static_cast<double>(ns) * 1e-9);
  return buf;
}

}  // namespace

std::int64_t closed_form_move_ns(const sim::ScenarioSpec& spec, const sim::MoveRecord& m,
                                 const cost_model::ComputeCosts& compute) {
  const sim::Topology topo = sim::build_topology(spec.cluster, spec.gpu.name);
  const int src = node_index(spec, m.source), dst = node_index(spec, m.to);
  // transfer = latency + 8·S/B over the route (the host link when source = destination).
  auto transfer = [&](std::int64_t bytes) -> std::int64_t {
    if (src < 0 || bytes <= 0) return 0;
    if (src == dst) return sim::from_seconds(8.0 * bytes / spec.gpu.host_link.value).ns;
    const sim::Route* r = topo.route(static_cast<sim::NodeId>(src), static_cast<sim::NodeId>(dst));
    if (!r) return -1;
    return r->latency.ns +
           sim::from_seconds(8.0 * static_cast<double>(bytes) / topo.bottleneck(*r).value).ns;
  };
  const std::int64_t avail = m.available_tokens;
  const std::int64_t full = cost_model::kv_bytes(spec.model, avail).count;
  std::int64_t t = 0;
  if (m.strategy == "full_kv") {
    t = transfer(full);
  } else if (m.strategy == "token_replay") {
    t = transfer(4 * m.context_tokens) + sim::from_seconds(compute.prefill(spec.model, m.context_tokens)).ns;
  } else if (m.strategy == "risk_kv") {
    const auto& topology = spec.risk_kv->topology;
    t = transfer(cost_model::storage(spec.model, topology, avail, {}).kv_kept.count) +
        sim::from_seconds(compute.reconstruct(spec.model, topology, avail, 1,
                                              spec.risk_kv->predictor_dtype))
            .ns;
  } else if (m.strategy == "proxy_kv") {
    t = transfer(std::llround(spec.proxy_kv->retention * static_cast<double>(full)));
  }
  if (m.tail_tokens > 0 && m.strategy != "token_replay") {
    t += sim::from_seconds(compute.prefill(spec.model, m.tail_tokens)).ns;
  }
  return t;
}

CheckOutcome check_moves_exact(const sim::ScenarioSpec& spec,
                               const std::vector<sim::RunResult>& runs,
                               const cost_model::ComputeCosts& compute) {
  CheckOutcome out;
  std::size_t checked = 0;
  for (const sim::RunResult& run : runs) {
    for (const sim::MoveRecord& m : run.moves) {
      if (!m.ok || m.predictor_bytes > 0) continue;  // a shipped predictor shares the path
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
    out.lines.push_back(std::to_string(checked) + " move(s) match the cost model to the nanosecond");
  }
  return out;
}

json golden_metrics(const json& summary) {
  static const char* kPaths[] = {"/requests/completed",  "/requests/failed",
                                 "/moves/recoveries",    "/moves/migrations",
                                 "/recovery/p50_s",      "/recovery/p99_s",
                                 "/migration/p50_s",     "/migration/p99_s",
                                 "/bytes/kv",            "/bytes/replica_stream",
                                 "/gpu_time_s/reconstruct", "/gpu_time_s/replay",
                                 "/goodput_tokens_per_s"};
  json out = json::object();
  for (const auto& [name, s] : summary["strategies"].items()) {
    json m = json::object();
    for (const char* p : kPaths) {
      const json::json_pointer ptr(p);
      if (s.contains(ptr)) m[p] = s[ptr];
    }
    out[name] = m;
  }
  return out;
}

CheckOutcome check_golden(const json& summary, const json& golden) {
  CheckOutcome out;
  const double tol = golden.value("tolerance_rel", 0.0);
  const json now = golden_metrics(summary);
  std::size_t compared = 0;
  for (const auto& [strategy, metrics] : golden.at("metrics").items()) {
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
  if (out.ok) out.lines.push_back(std::to_string(compared) + " metrics within tolerance of the golden file");
  return out;
}

}  // namespace kvshift::reports
