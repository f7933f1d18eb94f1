// Capacity search by bisection (see capacity_search.hpp).
#include "sweep/capacity_search.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_loader.hpp"

namespace kvshift::sweep {
namespace {

std::string printf_text(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Parses one end; returns its kind (kNumber when it has no unit).
KnobKind parse_end(const std::string& text, double& value, bool& integer) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0') {
    integer = text.find_first_of(".eE") == std::string::npos;
    return KnobKind::kNumber;
  }
  integer = false;
  try {
    value = parse_bandwidth(text, "--vary").value;
    return KnobKind::kBandwidth;
  } catch (const InputError&) {
  }
  try {
    value = parse_duration(text, "--vary").value;
    return KnobKind::kDuration;
  } catch (const InputError&) {
  }
  try {
    value = static_cast<double>(parse_bytes(text, "--vary").count);
    return KnobKind::kBytes;
  } catch (const InputError&) {
  }
  throw InputError(
      "--vary: \"" + text +
      "\" is neither a number nor a bandwidth, duration or size (e.g. 10Gbps, 2s, 4GiB)");
}

bool log_scale(const Knob& k) { return k.kind != KnobKind::kNumber; }

reports::StrategyMetrics metrics_at(const SweepPlan& plan, const SearchSettings& s, double value,
                                    const CostFactory& costs) {
  nlohmann::json doc = plan.base;
  apply_pointer(doc, s.knob.pointer, parse_value(knob_value_text(s.knob, value)));
  doc["policies"]["strategies"] = nlohmann::json::array({s.strategy});
  input::ScenarioLoad load = input::try_load_scenario_text(doc.dump(), plan.source, plan.base_dir);
  if (!load.spec) {
    std::string message = "--vary " + s.knob.pointer + "=" + knob_value_text(s.knob, value) + ":";
    for (const std::string& p : load.problems) message += "\n  " + plan.source + ": " + p;
    throw InputError(message);
  }
  const std::vector<reports::NamedMetrics> all =
      reports::strategies_from_json(simulate_point(*load.spec, costs));
  const reports::StrategyMetrics* m = reports::find_strategy(all, s.strategy);
  if (!m) throw std::logic_error("capacity search: the run has no strategy " + s.strategy);
  return *m;
}

}  // namespace

Knob parse_knob(std::string_view text) {
  const std::size_t eq = text.find('=');
  const std::size_t dots = text.find("..", eq == std::string_view::npos ? 0 : eq);
  if (eq == std::string_view::npos || dots == std::string_view::npos || text[0] != '/') {
    throw InputError(
        "--vary: expected POINTER=LO..HI such as /cluster/star/bandwidth=1Mbps..100Gbps (got \"" +
        std::string(text) + "\")");
  }
  Knob k;
  k.pointer = std::string(text.substr(0, eq));
  bool int_lo = false, int_hi = false;
  const KnobKind a = parse_end(std::string(text.substr(eq + 1, dots - eq - 1)), k.lo, int_lo);
  const KnobKind b = parse_end(std::string(text.substr(dots + 2)), k.hi, int_hi);
  if (a != b)
    throw InputError("--vary: LO and HI must be the same kind of quantity (got \"" +
                     std::string(text) + "\")");
  k.kind = a;
  k.integer = int_lo && int_hi;
  if (!(k.lo < k.hi))
    throw InputError("--vary: LO must be below HI (got \"" + std::string(text) + "\")");
  if (log_scale(k) && k.lo <= 0)
    throw InputError("--vary: LO must be > 0 (got \"" + std::string(text) + "\")");
  return k;
}

std::string knob_value_text(const Knob& k, double v) {
  switch (k.kind) {
    case KnobKind::kBandwidth:
      return printf_text("%.0fbps", std::round(v));
    case KnobKind::kDuration:
      return printf_text("%.0fns", std::round(v * 1e9));
    case KnobKind::kBytes:
      return printf_text("%.0fB", std::round(v));
    case KnobKind::kNumber:
      return k.integer ? printf_text("%.0f", std::round(v)) : printf_text("%.9g", v);
  }
  return "";
}

std::string knob_value_display(const Knob& k, double v) {
  switch (k.kind) {
    case KnobKind::kBandwidth:
      return format_bandwidth(BitsPerSecond{std::round(v)});
    case KnobKind::kDuration:
      return format_ms(Seconds{v});
    case KnobKind::kBytes:
      return format_mib(Bytes{static_cast<std::int64_t>(std::round(v))});
    case KnobKind::kNumber:
      return knob_value_text(k, v);
  }
  return "";
}

std::string choose_strategy(const nlohmann::json& scenario, const std::string& wanted) {
  std::vector<std::string> listed;
  const nlohmann::json::json_pointer ptr("/policies/strategies");
  if (scenario.contains(ptr) && scenario[ptr].is_array()) {
    for (const auto& s : scenario[ptr]) {
      if (s.is_string()) listed.push_back(s.get<std::string>());
    }
  }
  if (!wanted.empty()) return wanted;  // the loader judges an unknown name
  for (const std::string& s : listed) {
    if (s == "adaptive") return s;
  }
  if (listed.empty()) throw InputError("--strategy: the scenario lists no strategies; name one");
  return listed.front();
}

SearchResult capacity_search(const SweepPlan& plan, const SearchSettings& s,
                             const CostFactory& costs,
                             const std::function<void(const Probe&)>& on_probe) {
  SearchResult result;
  auto probe = [&](double v) {
    if (s.knob.kind == KnobKind::kNumber && s.knob.integer) v = std::round(v);
    Probe p;
    p.value = v;
    p.results = evaluate(s.objective, metrics_at(plan, s, v, costs));
    p.met = true;
    for (const ClauseResult& r : p.results) p.met = p.met && r.met;
    result.probes.push_back(p);
    if (on_probe) on_probe(p);
    (p.met ? result.answer : result.below) = v;
    return p.met;
  };
  if (!probe(s.knob.hi)) return result;
  if (probe(s.knob.lo)) return result;
  double lo = s.knob.lo, hi = s.knob.hi;
  while (static_cast<int>(result.probes.size()) < s.max_probes) {
    double mid;
    if (log_scale(s.knob)) {
      if (hi / lo <= 1 + s.tolerance) break;
      mid = std::sqrt(lo * hi);
    } else if (s.knob.integer) {
      if (hi - lo <= 1) break;
      mid = std::floor((lo + hi) / 2);
    } else {
      if (hi - lo <= s.tolerance * (s.knob.hi - s.knob.lo)) break;
      mid = (lo + hi) / 2;
    }
    (probe(mid) ? hi : lo) = mid;
  }
  return result;
}

}  // namespace kvshift::sweep
