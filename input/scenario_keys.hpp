// The keys a scenario file may hold, per object, in one place. The loader
// rejects any other key (with a did-you-mean) through these lists, and a test
// checks that scenarios/schema.json allows exactly the same keys: each entry
// names the schema location (a JSON pointer into schema.json) it mirrors.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

namespace kvshift::input::keys {

using List = std::initializer_list<std::string_view>;

inline const List kTop = {
    "$schema", "name",        "description",     "model",       "gpu",     "cluster",  "workload",
    "serving", "protection",  "events",          "policies",    "risk_kv", "proxy_kv", "predictors",
    "pools",   "deployments", "transfer_engine", "cost_source", "live",    "seed",     "duration",
    "slo",     "outputs"};
inline const List kModel = {"base",     "name",        "layers",         "hidden",
                            "q_heads",  "kv_heads",    "head_dim",       "intermediate",
                            "vocab",    "rope_theta",  "attention_bias", "tied_embeddings",
                            "kv_dtype", "weight_dtype"};
/// Mirrors input::parse_gpu_spec (spec_files.cpp).
inline const List kGpu = {"name",
                          "base",
                          "peak_dense_fp16_tflops",
                          "hbm_bandwidth",
                          "hbm_capacity",
                          "host_link",
                          "launch_overhead",
                          "gemm_efficiency",
                          "attention_efficiency",
                          "memory_efficiency"};
inline const List kCluster = {"node", "nodes",      "links",      "star",
                              "ring", "leaf_spine", "multi_site", "ecmp"};
inline const List kNodeTemplate = {"gpus", "hbm", "host_memory"};
inline const List kNode = {"name", "kind", "gpus", "hbm", "host_memory", "capacity", "site"};
inline const List kLink = {"name", "a", "b", "bandwidth", "latency", "duplex"};
inline const List kStar = {"nodes", "bandwidth", "latency"};
inline const List kLeafSpine = {"leaves",         "spines",           "nodes_per_leaf",
                                "node_bandwidth", "uplink_bandwidth", "oversubscription",
                                "latency",        "uplink_latency"};
inline const List kMultiSite = {"sites", "wan_bandwidth", "wan_latency"};
inline const List kSite = {"name", "nodes", "lan_bandwidth", "lan_latency"};
inline const List kWorkload = {"arrival",       "rate",         "cv",           "prompt_tokens",
                               "output_tokens", "trace",        "trace_format", "time_scale",
                               "max_requests",  "shared_prefix"};
inline const List kSharedPrefix = {"share", "groups", "tokens"};
inline const List kTokenDist = {"distribution", "value", "min", "max", "mean", "cv"};
inline const List kServing = {"max_batch", "kv_block_tokens", "prefill_chunk_tokens",
                              "prefix_cache", "preemption"};
inline const List kPreemption = {"mode", "watermark"};
inline const List kPrefixCache = {"enabled", "block_tokens", "host_offload", "ssd_tier",
                                  "storage_tier"};
inline const List kSsdTier = {"capacity", "read_bandwidth", "write_bandwidth"};
inline const List kStorageTier = {"node"};
inline const List kProtection = {"mode", "placement", "store", "stream_every_tokens"};
inline const List kEvent = {
    "type",         "at",        "node",    "gpu",  "link", "detection_delay",
    "repair_after", "bandwidth", "latency", "from", "to"};
inline const List kPool = {"name", "role", "router", "nodes", "site", "gpu"};
inline const List kDeployment = {"name",    "model",    "pools",         "share",
                                 "risk_kv", "proxy_kv", "prompt_tokens", "output_tokens"};
inline const List kTransferEngine = {"setup", "per_block", "max_inflight_per_destination",
                                     "stall_timeout"};
inline const List kPolicies = {"strategies", "router", "quality_budget", "rebalance"};
inline const List kRebalance = {"threshold", "check_interval"};
inline const List kRiskKv = {"topology", "delta_nll", "quality", "predictor_dtype"};
/// Mirrors input::parse_topology (spec_files.cpp), for an inline topology object.
inline const List kTopology = {"model",           "group_width", "anchor_width",
                               "omitted_groups",  "groups",      "quality",
                               "predictor_dtype", "gate",        "eps"};
inline const List kProxyKv = {"proxy_model", "placement", "retention",
                              "delta_nll",   "quality",   "quality_label"};
inline const List kPredictors = {"placement", "hbm_budget", "source", "batch_reconstruction"};
inline const List kLive = {"backend",    "model",  "proxy",  "proxy_layers",
                           "predictors", "mapper", "warmup", "repeats"};
inline const List kSlo = {"ttft", "tpot", "e2e"};
inline const List kOutputs = {"dir", "files", "link_sample_interval"};

/// One object kind: where schema.json describes it, and the keys the loader accepts.
struct Entry {
  std::string_view schema_pointer;
  List keys;
};

/// Every key list above with its schema location.
inline std::vector<Entry> all_entries() {
  return {{"", kTop},
          {"/$defs/model", kModel},
          {"/$defs/gpu", kGpu},
          {"/$defs/cluster", kCluster},
          {"/$defs/node_template", kNodeTemplate},
          {"/$defs/node", kNode},
          {"/$defs/link", kLink},
          {"/$defs/star", kStar},
          {"/$defs/ring", kStar},
          {"/$defs/leaf_spine", kLeafSpine},
          {"/$defs/multi_site", kMultiSite},
          {"/$defs/site", kSite},
          {"/$defs/workload", kWorkload},
          {"/$defs/shared_prefix", kSharedPrefix},
          {"/$defs/token_dist", kTokenDist},
          {"/$defs/serving", kServing},
          {"/$defs/prefix_cache", kPrefixCache},
          {"/$defs/ssd_tier", kSsdTier},
          {"/$defs/storage_tier", kStorageTier},
          {"/$defs/preemption", kPreemption},
          {"/$defs/live", kLive},
          {"/$defs/protection", kProtection},
          {"/$defs/event", kEvent},
          {"/$defs/pool", kPool},
          {"/$defs/deployment", kDeployment},
          {"/$defs/transfer_engine", kTransferEngine},
          {"/$defs/policies", kPolicies},
          {"/$defs/rebalance", kRebalance},
          {"/$defs/risk_kv", kRiskKv},
          {"/$defs/topology", kTopology},
          {"/$defs/proxy_kv", kProxyKv},
          {"/$defs/predictors", kPredictors},
          {"/$defs/slo", kSlo},
          {"/$defs/outputs", kOutputs}};
}

}  // namespace kvshift::input::keys
