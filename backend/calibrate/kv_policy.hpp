// KV policies whose quality `kvshift quality` measures: what a method does to
// a request's exact history KV before the next tokens are read from it.
//   exact                      the history KV as the prefill wrote it (NLL / PPL of the text)
//   risk-kv:TOPOLOGY.json      the omitted groups rebuilt by the RISK-KV predictors stored
//                              beside it (predictors.safetensors)
//   prune:snapkv | prune:h2o   top-K per KV head by the baseline's scores from the prefill
//   prune:kvzip                KVZip's oracle scores (a second "repeat the context" prefill)
//   prune:proxykv:MAPPER       ProxyKV: a small proxy model's attention through a trained mapper
//   prune:recent | prune:random  the floors: the newest tokens, and a seeded random set
// Pruning keeps the attention-sink and recent-window tokens of KeepPolicy in every case.
#pragma once

#include <string>
#include <vector>

namespace kvshift::backend::calibrate {

enum class PolicyKind { kExact, kRiskKv, kSnapKv, kH2o, kKvzip, kProxyKv, kRecent, kRandom };

struct KvPolicy {
  PolicyKind kind = PolicyKind::kExact;
  std::string text;  ///< as the user wrote it
  std::string file;  ///< topology.json (risk-kv) or mapper.safetensors (proxykv)
  bool prunes() const { return kind != PolicyKind::kExact && kind != PolicyKind::kRiskKv; }
};

/// Parses one policy; throws InputError naming `field` and listing the policies.
KvPolicy parse_policy(const std::string& text, const std::string& field);

/// The method's short name: "exact", "risk-kv", "snapkv", "h2o", "kvzip", "proxykv", "recent",
/// "random".
std::string method_name(PolicyKind kind);

/// Retention ratios "0.1,0.2,0.5": each in (0, 1], ascending without repeats; InputError names
/// `field`.
std::vector<double> parse_retentions(const std::string& text, const std::string& field);

}  // namespace kvshift::backend::calibrate
