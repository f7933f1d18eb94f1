// Capacity search: ends, quarter points, then bisection or a grid (see capacity_search.hpp).
#include "sweep/capacity_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_loader.hpp"

namespace kvshift::sweep {
namespace {

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

std::vector<Probe> by_value(std::vector<Probe> probes) {
  std::sort(probes.begin(), probes.end(),
            [](const Probe& a, const Probe& b) { return a.value < b.value; });
  return probes;
}

std::vector<MetStretch> met_stretches(const std::vector<Probe>& probes) {
  std::vector<MetStretch> out;
  bool open = false;
  for (const Probe& p : by_value(probes)) {
    if (p.met && open) out.back().to = p.value;
    if (p.met && !open) out.push_back({p.value, p.value});
    open = p.met;
  }
  return out;
}

bool narrow_enough(const Knob& k, double a, double b, double tolerance) {
  if (log_scale(k)) return b / a <= 1 + tolerance;
  if (k.integer) return b - a <= 1;
  return b - a <= tolerance * (k.hi - k.lo);
}

double midpoint(const Knob& k, double a, double b) {
  if (log_scale(k)) return std::sqrt(a * b);
  if (k.integer) return std::floor((a + b) / 2);
  return (a + b) / 2;
}

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

Want parse_want(std::string_view text) {
  if (text == "least") return Want::kLeast;
  if (text == "most") return Want::kMost;
  throw InputError("--want: must be least or most (got \"" + std::string(text) + "\")");
}

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
      return format_number("%.0fbps", std::round(v));
    case KnobKind::kDuration:
      return format_number("%.0fns", std::round(v * 1e9));
    case KnobKind::kBytes:
      return format_number("%.0fB", std::round(v));
    case KnobKind::kNumber:
      return k.integer ? format_number("%.0f", std::round(v)) : format_number("%.9g", v);
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

void check_strategy(const SweepPlan& plan, const std::string& strategy) {
  nlohmann::json doc = plan.base;
  doc["policies"]["strategies"] = nlohmann::json::array({strategy});
  const input::ScenarioLoad load =
      input::try_load_scenario_text(doc.dump(), plan.source, plan.base_dir);
  const std::string where = "/policies/strategies/0: ";
  for (const std::string& p : load.problems) {
    if (p.rfind(where, 0) == 0) throw InputError("--strategy: " + p.substr(where.size()));
  }
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

const Probe* probe_at(const SearchResult& result, double value) {
  for (const Probe& p : result.probes) {
    if (std::abs(p.value - value) <= 1e-12 * std::max(std::abs(p.value), std::abs(value))) {
      return &p;
    }
  }
  return nullptr;
}

namespace {

// One search in progress: the probes so far and the steps that add to them.
class Search {
 public:
  Search(const SweepPlan& plan, const SearchSettings& s, const CostFactory& costs,
         const std::function<void(const Probe&)>& on_probe)
      : plan_(plan), s_(s), costs_(costs), on_probe_(on_probe) {}

  SearchResult run() {
    const Knob& k = s_.knob;
    const bool hi_met = probe(k.hi, false);
    const bool lo_met = probe(k.lo, false);
    if (least() ? lo_met : hi_met) {
      result_.answer = least() ? k.lo : k.hi;  // the wanted end meets it: no assumption needed
    } else {
      for (double q : {0.5, 0.25, 0.75}) {
        if (budget_left()) probe(at(q), false);
      }
      const std::vector<Probe> sorted = by_value(result_.probes);
      std::vector<std::size_t> switches;  // i: sorted[i] and sorted[i + 1] differ
      for (std::size_t i = 0; i + 1 < sorted.size(); ++i) {
        if (sorted[i].met != sorted[i + 1].met) switches.push_back(i);
      }
      if (switches.size() == 1) bisect(sorted[switches[0]].value, sorted[switches[0] + 1].value);
      if (switches.size() > 1) grid();
    }
    result_.met_stretches = met_stretches(result_.probes);
    return std::move(result_);
  }

 private:
  bool least() const { return s_.want == Want::kLeast; }
  bool budget_left() const { return static_cast<int>(result_.probes.size()) < s_.max_probes; }

  // The value at share `q` of the range, on the knob's scale.
  double at(double q) const {
    const Knob& k = s_.knob;
    return log_scale(k) ? k.lo * std::pow(k.hi / k.lo, q) : k.lo + q * (k.hi - k.lo);
  }

  // Runs the simulation at `v` (once per value) and says whether it met the objective.
  bool probe(double v, bool grid) {
    if (s_.knob.kind == KnobKind::kNumber && s_.knob.integer) v = std::round(v);
    if (const Probe* seen = probe_at(result_, v)) return seen->met;
    const reports::StrategyMetrics m = metrics_at(plan_, s_, v, costs_);
    Probe p;
    p.value = v;
    p.grid = grid;
    p.results = evaluate(s_.objective, m);
    p.met = true;
    for (const ClauseResult& r : p.results) p.met = p.met && r.met;
    p.moves = {m.moves.fallbacks, m.moves.unfinished, m.moves.failed, m.moves.by_strategy};
    result_.probes.push_back(p);
    if (on_probe_) on_probe_(p);
    return p.met;
  }

  // Monotone as far as the probes show: narrows the bracket [a, b] where it switches. The wanted
  // end does not meet it, so the met side is b (HI's) for least and a (LO's) for most.
  void bisect(double a, double b) {
    while (budget_left() && !narrow_enough(s_.knob, a, b, s_.tolerance)) {
      const double mid = midpoint(s_.knob, a, b);
      if (mid <= a || mid >= b) break;
      (probe(mid, false) == least() ? b : a) = mid;
    }
    result_.answer = least() ? b : a;
    result_.nearest_unmet = least() ? a : b;
  }

  // Not monotone over the range (bisection would answer whichever switch it met first): an even
  // grid, and the least (largest) grid value that meets the objective.
  void grid() {
    result_.monotone = false;
    const int intervals = 4 * std::max(1, (s_.max_probes - 1) / 4);
    for (int i = 1; i < intervals && budget_left(); ++i) probe(at(double(i) / intervals), true);
    const std::vector<Probe> sorted = by_value(result_.probes);
    for (std::size_t j = 0; j < sorted.size(); ++j) {
      const std::size_t i = least() ? j : sorted.size() - 1 - j;
      if (!sorted[i].met) continue;
      result_.answer = sorted[i].value;
      if (least() && i > 0) result_.nearest_unmet = sorted[i - 1].value;
      if (!least() && i + 1 < sorted.size()) result_.nearest_unmet = sorted[i + 1].value;
      return;
    }
  }

  const SweepPlan& plan_;
  const SearchSettings& s_;
  const CostFactory& costs_;
  const std::function<void(const Probe&)>& on_probe_;
  SearchResult result_;
};

}  // namespace

SearchResult capacity_search(const SweepPlan& plan, const SearchSettings& settings,
                             const CostFactory& costs,
                             const std::function<void(const Probe&)>& on_probe) {
  return Search(plan, settings, costs, on_probe).run();
}

}  // namespace kvshift::sweep
