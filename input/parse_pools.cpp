// The "pools" and "transfer_engine" sections. Pools name sets of gpu nodes (by
// node name or by site) with a role — prefill, decode or mixed — a routing
// policy and optionally their own GPU; with a prefill pool the scenario is
// disaggregated (every request's KV is handed from a prefill to a decode GPU).
// Every GPU node of a scenario with pools is in exactly one pool. The transfer
// engine's setup, per-descriptor cost, in-flight cap and stall timeout apply
// to every KV move; all default to an ideal link.
#include <map>
#include <set>

#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {
namespace {

constexpr std::size_t kMaxPools = 64;  // the router's pool sets are 64-bit masks

// The pool's members, as node indices: its "nodes" list or its "site".
std::vector<std::size_t> members(const Reader& p, const sim::ClusterSpec& c) {
  std::vector<std::size_t> out;
  std::map<std::string, std::size_t> index;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.nodes.size(); ++i) {
    index.emplace(c.nodes[i].name, i);
    names.push_back(c.nodes[i].name);
  }
  if (p.has("nodes") == p.has("site")) {
    p.problem(
        "a pool names its members by \"nodes\" (a list of node names) or by \"site\", "
        "exactly one of them");
    return out;
  }
  if (auto site = p.string("site", false)) {
    for (std::size_t i = 0; i < c.nodes.size(); ++i) {
      if (c.nodes[i].site == *site && c.nodes[i].kind == sim::NodeKind::kGpu) out.push_back(i);
    }
    if (out.empty()) p.problem("site", "no gpu node is in site \"" + *site + "\"");
    return out;
  }
  p.each("nodes", [&](const Reader& n) {
    if (!n.node().is_string()) {
      n.problem("expected a node name (a string)");
      return;
    }
    const std::string name = n.node().get<std::string>();
    const auto it = index.find(name);
    if (it == index.end()) {
      n.problem("unknown node \"" + name + "\"" + closest_name(name, names));
    } else if (c.nodes[it->second].kind != sim::NodeKind::kGpu) {
      n.problem("node \"" + name + "\" is not a gpu node");
    } else {
      out.push_back(it->second);
    }
  });
  return out;
}

}  // namespace

std::optional<sim::Router> parse_router(const Reader& r, bool required) {
  return enum_field<sim::Router>(r, "router",
                                 {{"least_loaded", sim::Router::kLeastLoaded},
                                  {"kv_aware", sim::Router::kKvAware},
                                  {"round_robin", sim::Router::kRoundRobin},
                                  {"random", sim::Router::kRandom},
                                  {"prefix_aware", sim::Router::kPrefixAware}},
                                 required);
}

std::vector<sim::PoolSpec> parse_pools(const Reader& top, ScenarioSpec& s, LoadContext& ctx) {
  std::vector<sim::PoolSpec> pools;
  if (!top.has("pools")) return pools;
  std::set<std::string> names;
  std::vector<int> owner(s.cluster.nodes.size(), -1);
  top.each("pools", [&](const Reader& p) {
    p.allow_only(keys::kPool);
    sim::PoolSpec pool;
    pool.name = p.string("name").value_or("");
    if (!pool.name.empty() && !names.insert(pool.name).second) {
      p.problem("name", "duplicate pool name \"" + pool.name + "\"");
    }
    pool.role = enum_field<sim::PoolRole>(p, "role",
                                          {{"prefill", sim::PoolRole::kPrefill},
                                           {"decode", sim::PoolRole::kDecode},
                                           {"mixed", sim::PoolRole::kMixed}},
                                          true)
                    .value_or(sim::PoolRole::kMixed);
    pool.router = parse_router(p, false).value_or(s.policies.router);
    if (p.has("gpu")) {
      pool.gpu = parse_gpu(p, ctx);
      if (s.cost_source.kind != CostSourceKind::kAnalytic) {
        p.problem("gpu",
                  "a pool's own GPU needs \"cost_source\": \"analytic\" (a profiled or "
                  "live cost table measures one GPU)");
      }
    }
    const std::size_t problems_before = p.diagnostics().items().size();
    const int index = static_cast<int>(pools.size());
    const std::vector<std::size_t> nodes = members(p, s.cluster);
    int gpus = 0;
    for (std::size_t i : nodes) {
      sim::ClusterNode& node = s.cluster.nodes[i];
      if (owner[i] >= 0 && owner[i] != index) {
        p.problem("node \"" + node.name + "\" is already in pool \"" +
                  pools[static_cast<std::size_t>(owner[i])].name + "\"");
        continue;
      }
      owner[i] = index;
      node.pool = index;
      gpus += node.gpu_count;
      // A pool's GPU brings its HBM, unless the node says otherwise.
      if (pool.gpu && ctx.hbm_origin[i] == "/gpu") {
        node.hbm_per_gpu = pool.gpu->hbm_capacity;
        ctx.hbm_origin[i] = p.pointer() + "/gpu";
      }
    }
    if (gpus == 0 && p.diagnostics().items().size() == problems_before) {
      p.problem("the pool has no GPU");
    }
    pools.push_back(std::move(pool));
  });
  if (pools.size() > kMaxPools) {
    top.problem("pools", "at most " + std::to_string(kMaxPools) + " pools (got " +
                             std::to_string(pools.size()) + ")");
  }
  if (!top.diagnostics().empty()) return pools;
  for (std::size_t i = 0; i < s.cluster.nodes.size(); ++i) {
    if (s.cluster.nodes[i].kind == sim::NodeKind::kGpu && owner[i] < 0) {
      top.problem("pools", "gpu node \"" + s.cluster.nodes[i].name +
                               "\" is in no pool (with pools, every gpu node has a role)");
      break;
    }
  }
  bool prefill = false, decode = false;
  for (const sim::PoolSpec& p : pools) {
    (p.role == sim::PoolRole::kPrefill ? prefill : decode) = true;
  }
  if (prefill && !decode) {
    top.problem("pools", "a prefill pool needs a decode or mixed pool to hand its requests to");
  }
  return pools;
}

sim::TransferEngineSpec parse_transfer_engine(const Reader& r) {
  r.allow_only(keys::kTransferEngine);
  sim::TransferEngineSpec t;
  t.setup = duration_at_least0(r, "setup", false, false).value_or(Seconds{0});
  t.per_block = duration_at_least0(r, "per_block", false, false).value_or(Seconds{0});
  t.max_inflight_per_destination =
      static_cast<int>(int_in(r, "max_inflight_per_destination", 0, 1'000'000, false).value_or(0));
  t.stall_timeout = duration_at_least0(r, "stall_timeout", true, false);
  return t;
}

}  // namespace kvshift::input::detail
