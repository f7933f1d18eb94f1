// KV policy names; see kv_policy.hpp.
#include "backend/calibrate/kv_policy.hpp"

#include <sstream>

#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"

namespace kvshift::backend::calibrate {
namespace {

constexpr const char* kPolicies =
    "exact, risk-kv:TOPOLOGY.json, prune:snapkv, prune:h2o, prune:kvzip, "
    "prune:proxykv:MAPPER.safetensors, prune:recent, prune:random";

}  // namespace

KvPolicy parse_policy(const std::string& text, const std::string& field) {
  KvPolicy p;
  p.text = text;
  auto needs_file = [&](const std::string& prefix, PolicyKind kind, const char* what) {
    p.kind = kind;
    p.file = text.substr(prefix.size());
    if (p.file.empty()) throw InputError(field + ": \"" + text + "\" needs " + what);
    return p;
  };
  if (text == "exact") return p;
  if (text.starts_with("risk-kv:")) {
    return needs_file("risk-kv:", PolicyKind::kRiskKv, "a topology.json after the colon");
  }
  if (text.starts_with("prune:proxykv:")) {
    return needs_file("prune:proxykv:", PolicyKind::kProxyKv,
                      "a mapper.safetensors after \"prune:proxykv:\"");
  }
  const std::pair<const char*, PolicyKind> simple[] = {{"prune:snapkv", PolicyKind::kSnapKv},
                                                       {"prune:h2o", PolicyKind::kH2o},
                                                       {"prune:kvzip", PolicyKind::kKvzip},
                                                       {"prune:recent", PolicyKind::kRecent},
                                                       {"prune:random", PolicyKind::kRandom}};
  for (const auto& [name, kind] : simple) {
    if (text == name) {
      p.kind = kind;
      return p;
    }
  }
  std::string hint = input::did_you_mean(
      text, {"exact", "prune:snapkv", "prune:h2o", "prune:kvzip", "prune:recent", "prune:random"});
  if (text == "risk-kv" || text == "prune:proxykv") hint.clear();
  throw InputError(field + ": unknown policy \"" + text + "\" (expected " + kPolicies +
                   (hint.empty() ? ")" : "; did you mean \"" + hint + "\"?)"));
}

std::string method_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kExact:
      return "exact";
    case PolicyKind::kRiskKv:
      return "risk-kv";
    case PolicyKind::kSnapKv:
      return "snapkv";
    case PolicyKind::kH2o:
      return "h2o";
    case PolicyKind::kKvzip:
      return "kvzip";
    case PolicyKind::kProxyKv:
      return "proxykv";
    case PolicyKind::kRecent:
      return "recent";
    case PolicyKind::kRandom:
      return "random";
  }
  return "?";
}

std::vector<double> parse_retentions(const std::string& text, const std::string& field) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    double v = 0.0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(v > 0.0 && v <= 1.0)) {
      throw InputError(field + ": \"" + item + "\": a retention ratio must be in (0, 1]");
    }
    if (!out.empty() && v <= out.back()) {
      throw InputError(field + ": ratios must ascend without repeats (\"" + text + "\")");
    }
    out.push_back(v);
  }
  if (out.empty()) throw InputError(field + ": give at least one ratio, e.g. 0.2,0.5");
  return out;
}

}  // namespace kvshift::backend::calibrate
