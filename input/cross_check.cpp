// Pass two of the loader: cross-references between sections, checked once
// every section has parsed cleanly (so no check fires on half-read data).
// Rules: unique names; link endpoints exist; at least one GPU node; every
// node reachable; model weights and the largest request's KV fit in each
// GPU's HBM; event targets exist and fall inside the duration; methods used
// by strategies or protection are configured; lossy strategies fit the
// quality budget; proxy shares the target's tokenizer and is smaller;
// replica store, predictor source and profile file exist.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "cost_model/storage.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {
namespace {

using sim::NodeKind;

struct Names {
  std::map<std::string, const sim::ClusterNode*> nodes;
  std::set<std::string> links;
};

std::string suggestion(const std::string& word,
                       const std::map<std::string, const sim::ClusterNode*>& m) {
  std::vector<std::string> names;
  for (const auto& [name, node] : m) names.push_back(name);
  return closest_name(word, names);
}

std::string gib(Bytes b) { return format_number("%.2f GiB", b.mib() / 1024.0); }

// Pointer of the JSON that defined cluster node `i`.
std::string node_ptr(const LoadContext& ctx, std::size_t i) {
  return i < ctx.generated_nodes ? ctx.generator_pointer
                                 : "/cluster/nodes/" + std::to_string(i - ctx.generated_nodes);
}

Names cluster_names(const sim::ClusterSpec& c, Diagnostics& d, const LoadContext& ctx) {
  Names n;
  for (std::size_t i = 0; i < c.nodes.size(); ++i) {
    if (!n.nodes.emplace(c.nodes[i].name, &c.nodes[i]).second) {
      d.add(node_ptr(ctx, i) + "/name", "duplicate node name \"" + c.nodes[i].name + "\"");
    }
  }
  // (A link's ends were resolved, and checked to differ, when it was read.)
  for (std::size_t i = 0; i < c.links.size(); ++i) {
    if (!n.links.insert(c.links[i].name).second) {
      d.add(ctx.link_pointers[i] + "/name", "duplicate link name \"" + c.links[i].name + "\"");
    }
  }
  return n;
}

Names check_cluster(const sim::ClusterSpec& c, Diagnostics& d, const LoadContext& ctx) {
  Names n = cluster_names(c, d, ctx);
  if (!d.empty()) return n;  // reachability is meaningless with broken links
  if (std::none_of(c.nodes.begin(), c.nodes.end(),
                   [](const auto& x) { return x.kind == NodeKind::kGpu; })) {
    d.add("/cluster", "has no GPU node");
    return n;
  }
  // Reachability from the first node over the links (undirected).
  std::vector<std::vector<sim::NodeId>> adj(c.nodes.size());
  for (const auto& l : c.links) {
    adj[l.a].push_back(l.b);
    adj[l.b].push_back(l.a);
  }
  std::vector<bool> seen(c.nodes.size());
  seen[0] = true;
  std::vector<sim::NodeId> stack{0};
  while (!stack.empty()) {
    const sim::NodeId x = stack.back();
    stack.pop_back();
    for (const sim::NodeId y : adj[x]) {
      if (!seen[y]) {
        seen[y] = true;
        stack.push_back(y);
      }
    }
  }
  int reported = 0;
  for (std::size_t i = 0; i < c.nodes.size() && c.nodes.size() > 1; ++i) {
    if (seen[i] || reported++ >= 5) continue;
    d.add(node_ptr(ctx, i), "node \"" + c.nodes[i].name + "\" is not connected to \"" +
                                c.nodes.front().name + "\" by any path of links");
  }
  return n;
}

// The largest request deployment `index` of `m` may get: of the trace, those naming it or
// none; generated, its own lengths or the workload's.
std::int64_t largest_request_tokens(const sim::WorkloadSpec& w, const sim::DeploymentSpec& m,
                                    int index) {
  if (w.arrival == sim::ArrivalKind::kTrace) {
    std::int64_t most = 0;
    for (const auto& t : w.trace) {
      if (t.deployment < 0 || t.deployment == index)
        most = std::max(most, t.prompt_tokens + t.output_tokens);
    }
    return most;
  }
  auto top = [](const sim::TokenDist& d) -> std::int64_t {
    if (d.kind == sim::TokenDistKind::kFixed) return d.value;
    if (d.kind == sim::TokenDistKind::kUniform) return d.max;
    return 0;  // lognormal: its clamp is a tail bound, not a typical size
  };
  return top(m.prompt_tokens.value_or(w.prompt_tokens)) +
         top(m.output_tokens.value_or(w.output_tokens));
}

// Deployment `index`'s model (its weights, its largest request's KV) on its GPU nodes.
void check_memory(const ScenarioSpec& s, const sim::DeploymentSpec& m, int index, Diagnostics& d,
                  const LoadContext& ctx) {
  const Bytes weights{m.model.parameter_count() * cost_model::dtype_bytes(m.model.weight_dtype)};
  const std::int64_t tokens = largest_request_tokens(s.workload, m, index);
  const Bytes kv = cost_model::kv_bytes(m.model, tokens);
  std::set<std::string> said;
  for (std::size_t i = 0; i < s.cluster.nodes.size(); ++i) {
    const sim::ClusterNode& n = s.cluster.nodes[i];
    if (n.kind != NodeKind::kGpu || !serves(s, m, n)) continue;
    const std::string& p = ctx.hbm_origin[i];
    if (said.count(p)) continue;
    if (weights > n.hbm_per_gpu) {
      d.add(p, "model " + m.model.name + " weights (" + gib(weights) + ") do not fit in the " +
                   gib(n.hbm_per_gpu) + " HBM of a GPU of node \"" + n.name + "\"");
      said.insert(p);
    } else if (weights + kv > n.hbm_per_gpu) {
      d.add(p, "the largest request (" + std::to_string(tokens) + " tokens, " + gib(kv) +
                   " of KV) does not fit beside the model weights (" + gib(weights) + ") in the " +
                   gib(n.hbm_per_gpu) + " HBM of node \"" + n.name + "\"");
      said.insert(p);
    }
  }
  if (s.serving.prefix_cache.enabled && s.serving.prefix_cache.host_offload) {
    const Bytes block = cost_model::kv_bytes(m.model, s.serving.prefix_cache.block_tokens);
    for (std::size_t i = 0; i < s.cluster.nodes.size(); ++i) {
      const sim::ClusterNode& n = s.cluster.nodes[i];
      if (n.kind != NodeKind::kGpu || n.host_memory >= block || !serves(s, m, n)) continue;
      const std::string p = i < ctx.generated_nodes ? "/cluster/node" : node_ptr(ctx, i);
      if (said.insert(p + "/host_memory").second) {
        d.add(p + "/host_memory",
              "the host tier of node \"" + n.name + "\" (" + std::to_string(n.host_memory.count) +
                  " bytes) is smaller than one prefix block (" + std::to_string(block.count) +
                  " bytes, serving.prefix_cache.block_tokens " +
                  std::to_string(s.serving.prefix_cache.block_tokens) + ")");
      }
    }
    if (const auto& st = s.serving.prefix_cache.storage_tier) {
      const auto it = std::find_if(s.cluster.nodes.begin(), s.cluster.nodes.end(),
                                   [&](const sim::ClusterNode& n) { return n.name == st->node; });
      const std::string where = "/serving/prefix_cache/storage_tier/node";
      if (it == s.cluster.nodes.end()) {
        d.add(where, "unknown node \"" + st->node + "\"");
      } else if (it->kind != sim::NodeKind::kStorage) {
        d.add(where, "node \"" + st->node + "\" is not a storage node");
      } else if (it->host_memory < block) {
        d.add(where, "storage node \"" + st->node + "\" (" + std::to_string(it->host_memory.count) +
                         " bytes) is smaller than one prefix block (" +
                         std::to_string(block.count) + " bytes)");
      }
    }
    const auto& ssd = s.serving.prefix_cache.ssd_tier;
    if (ssd && ssd->capacity < block) {
      d.add("/serving/prefix_cache/ssd_tier/capacity",
            "the SSD tier (" + std::to_string(ssd->capacity.count) +
                " bytes a node) is smaller than one prefix block (" + std::to_string(block.count) +
                " bytes, serving.prefix_cache.block_tokens " +
                std::to_string(s.serving.prefix_cache.block_tokens) + ")");
    }
  }
}

void check_events(const ScenarioSpec& s, const Names& n, Diagnostics& d, const LoadContext& ctx) {
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    const sim::EventSpec& e = s.events[i];
    const std::string p = "/events/" + std::to_string(ctx.event_order[i]);
    if (e.at > s.duration) {
      d.add(p + "/at", "must be within the scenario's duration (" + format_ms(s.duration) +
                           ") (got " + format_ms(e.at) + ")");
    }
    if (!e.node.empty()) {
      auto it = n.nodes.find(e.node);
      if (it == n.nodes.end()) {
        d.add(p + "/node", "unknown node \"" + e.node + "\"" + suggestion(e.node, n.nodes));
      } else if (e.kind == sim::EventKind::kDrain && it->second->kind != NodeKind::kGpu) {
        d.add(p + "/node", "drain needs a GPU node (\"" + e.node + "\" is not one)");
      } else if (e.kind == sim::EventKind::kGpuFailure && it->second->kind != NodeKind::kGpu) {
        d.add(p + "/node", "gpu_failure needs a GPU node (\"" + e.node + "\" is not one)");
      } else if (e.kind == sim::EventKind::kGpuFailure && e.gpu >= it->second->gpu_count) {
        d.add(p + "/gpu", "node \"" + e.node + "\" has " + std::to_string(it->second->gpu_count) +
                              " GPU(s), numbered from 0 (got " + std::to_string(e.gpu) + ")");
      }
    }
    for (const auto& [key, name] : {std::pair{"/from", &e.from}, std::pair{"/to", &e.to}}) {
      if (name->empty()) continue;
      const auto it = n.nodes.find(*name);
      if (it == n.nodes.end()) {
        d.add(p + key, "unknown node \"" + *name + "\"" + suggestion(*name, n.nodes));
      } else if (it->second->kind == NodeKind::kSwitch) {
        d.add(p + key, "a path ends at a gpu or storage node (\"" + *name + "\" is a switch)");
      }
    }
    if (!e.link.empty() && !n.links.count(e.link)) {
      d.add(p + "/link", "unknown link \"" + e.link + "\"" +
                             closest_name(e.link, {n.links.begin(), n.links.end()}));
    }
  }
}

// The memory, method and placement checks of one deployment: its model on its pools' nodes.
// Problems in its own sections point into it; the memory and method problems name it.
void check_deployment(const ScenarioSpec& spec, std::size_t i, Diagnostics& d,
                      const LoadContext& ctx) {
  const sim::DeploymentSpec& dep = spec.deployments[i];
  Diagnostics named, placements;
  check_memory(spec, dep, static_cast<int>(i), named, ctx);
  check_methods(spec, dep, named);
  check_placements(spec, dep, placements);
  const std::string here = "/deployments/" + std::to_string(i);
  auto add = [&](const Diagnostics& found, bool name_it) {
    for (const std::string& item : found.items()) {
      const std::size_t colon = item.find(": ");
      std::string pointer = item.substr(0, colon);
      std::string message = item.substr(colon + 2);
      if (pointer.starts_with("/risk_kv") || pointer.starts_with("/proxy_kv")) {
        pointer = here + pointer;
      } else if (name_it) {
        message = "deployment \"" + dep.name + "\": " + message;
      }
      // The placement checks that do not depend on the model say the same for each one.
      if (std::find(d.items().begin(), d.items().end(), pointer + ": " + message) ==
          d.items().end()) {
        d.add(pointer, message);
      }
    }
  };
  add(named, true);
  add(placements, false);
}

}  // namespace

void check_cluster_names(const sim::ClusterSpec& cluster, Diagnostics& d, const LoadContext& ctx) {
  cluster_names(cluster, d, ctx);
}

void cross_check(const ScenarioSpec& spec, const Reader& top, const LoadContext& ctx) {
  Diagnostics& d = top.diagnostics();
  const Names names = check_cluster(spec.cluster, d, ctx);
  if (!d.empty()) return;  // later checks assume a sound cluster
  if (spec.deployments.empty()) {
    const sim::DeploymentSpec one = sim::served_deployments(spec).front();
    check_memory(spec, one, 0, d, ctx);
    check_methods(spec, one, d);
    check_placements(spec, one, d);
  } else {
    for (std::size_t i = 0; i < spec.deployments.size(); ++i) check_deployment(spec, i, d, ctx);
  }
  check_events(spec, names, d, ctx);
  if (!spec.serving.prefix_cache.enabled) {
    // Prefix-aware routing places arrivals by what the GPUs have cached.
    const char* why = "prefix_aware routes by cached prefix: it needs serving.prefix_cache";
    if (spec.policies.router == sim::Router::kPrefixAware) d.add("/policies/router", why);
    for (std::size_t i = 0; i < spec.pools.size(); ++i) {
      if (spec.pools[i].router == sim::Router::kPrefixAware &&
          spec.policies.router != sim::Router::kPrefixAware) {
        d.add("/pools/" + std::to_string(i) + "/router", why);
      }
    }
  }
  std::error_code ec;
  if (spec.cost_source.kind == CostSourceKind::kProfile &&
      !std::filesystem::is_regular_file(spec.cost_source.profile_path, ec)) {
    d.add("/cost_source",
          "cost table \"" + spec.cost_source.profile_path + "\" is not a readable file");
  }
}

}  // namespace kvshift::input::detail
