// Objective parsing and evaluation (see objective.hpp).
#include "sweep/objective.hpp"

#include <cstdlib>
#include <set>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"

namespace kvshift::sweep {
namespace {

const std::set<std::string> kDistributions = {"ttft", "e2e", "recovery", "recovery_stall",
                                              "migration"};
const std::set<std::string> kStats = {"count", "mean", "p50", "p90", "p99", "max"};
const std::set<std::string> kGroups = {"requests", "moves",      "bytes",   "gpu_time_s",
                                       "replicas", "predictors", "quality", "slo"};
const std::set<std::string> kScalars = {"goodput_tokens_per_s", "events"};

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

[[noreturn]] void bad(const std::string& clause, const std::string& why) {
  throw InputError("--objective: \"" + clause + "\": " + why +
                   " (expected METRIC OP VALUE such as \"recovery.p99<=2s\", OP one of <= < >= >, "
                   "clauses joined by &&)");
}

// Maps "recovery.p99" to "/recovery/p99_s"; throws for unknown metrics.
std::string metric_pointer(const std::string& metric, const std::string& clause) {
  const auto dot = metric.find('.');
  const std::string head = metric.substr(0, dot);
  const std::string tail = dot == std::string::npos ? "" : metric.substr(dot + 1);
  if (kScalars.count(head) && tail.empty()) return "/" + head;
  if (kDistributions.count(head)) {
    std::string stat = tail;
    if (stat.size() > 2 && stat.ends_with("_s")) stat.resize(stat.size() - 2);
    if (!kStats.count(stat))
      bad(clause, "unknown statistic \"" + tail + "\" of " + head +
                      " (known: count, mean, p50, p90, p99, max)");
    return "/" + head + "/" + stat + (stat == "count" ? "" : "_s");
  }
  if (kGroups.count(head) && !tail.empty() && tail.find('.') == std::string::npos) {
    return "/" + head + "/" + tail;
  }
  bad(clause,
      "unknown metric \"" + metric +
          "\" (known: ttft/e2e/recovery/recovery_stall/migration.<p50|p90|p99|mean|max|count>, "
          "requests.<completed|failed|...>, moves.*, bytes.*, gpu_time_s.*, quality.*, "
          "goodput_tokens_per_s, events)");
}

double parse_bound(const std::string& pointer, const std::string& value,
                   const std::string& clause) {
  try {
    if ((pointer.ends_with("_s") && !pointer.ends_with("per_s")) ||
        pointer.find("/gpu_time_s/") == 0) {
      return parse_duration(value, "--objective").value;
    }
    char* end = nullptr;
    const double plain = std::strtod(value.c_str(), &end);
    if (!value.empty() && *end == '\0') return plain;
    if (pointer.find("/bytes/") == 0 || pointer.ends_with("bytes")) {
      return static_cast<double>(parse_bytes(value, "--objective").count);
    }
  } catch (const InputError& e) {
    bad(clause, e.what());
  }
  bad(clause, "\"" + value + "\" is not a number");
}

Clause parse_clause(const std::string& clause) {
  static const std::pair<const char*, Comparison> kOps[] = {{"<=", Comparison::kLessEqual},
                                                            {">=", Comparison::kGreaterEqual},
                                                            {"<", Comparison::kLess},
                                                            {">", Comparison::kGreater}};
  for (const auto& [op, cmp] : kOps) {
    const auto at = clause.find(op);
    if (at == std::string::npos) continue;
    Clause c;
    c.text = clause;
    c.op = cmp;
    c.metric = trim(clause.substr(0, at));
    const std::string value = trim(clause.substr(at + std::string(op).size()));
    if (c.metric.empty()) bad(clause, "no metric before " + std::string(op));
    if (value.empty()) bad(clause, "no value after " + std::string(op));
    if (value.find_first_of("<>=") != std::string::npos) bad(clause, "more than one comparison");
    c.pointer = metric_pointer(c.metric, clause);
    c.bound = parse_bound(c.pointer, value, clause);
    return c;
  }
  bad(clause, "no comparison");
}

}  // namespace

Objective parse_objective(std::string_view text) {
  Objective o;
  o.text = std::string(text);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find("&&", start);
    const std::string clause =
        trim(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (clause.empty()) bad(std::string(text), "empty clause");
    o.clauses.push_back(parse_clause(clause));
    if (end == std::string_view::npos) break;
    start = end + 2;
  }
  return o;
}

std::vector<ClauseResult> evaluate(const Objective& objective, const nlohmann::json& summary) {
  std::vector<ClauseResult> results;
  for (const Clause& c : objective.clauses) {
    ClauseResult r;
    const nlohmann::json::json_pointer ptr(c.pointer);
    if (summary.contains(ptr) && summary[ptr].is_number()) {
      const double v = summary[ptr].get<double>();
      r.value = v;
      switch (c.op) {
        case Comparison::kLessEqual:
          r.met = v <= c.bound;
          break;
        case Comparison::kLess:
          r.met = v < c.bound;
          break;
        case Comparison::kGreaterEqual:
          r.met = v >= c.bound;
          break;
        case Comparison::kGreater:
          r.met = v > c.bound;
          break;
      }
    }
    results.push_back(r);
  }
  return results;
}

std::vector<ClauseResult> evaluate(const Objective& objective,
                                   const reports::StrategyMetrics& metrics) {
  return evaluate(objective, reports::to_json(metrics));
}

}  // namespace kvshift::sweep
