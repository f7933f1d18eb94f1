// `kvshift search SCENARIO --vary POINTER=LO..HI --objective EXPR`: capacity
// planning - the smallest value of one knob (bandwidth, replicas, ...) for
// which one strategy meets an SLO over its summary metrics, by bisection
// (log scale for bandwidths, durations and sizes), printing every probe.
// Exit 0: found; 3: not met even at HI; 2: bad input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "cost_model/input_error.hpp"
#include "reports/atomic_file.hpp"
#include "sweep/capacity_search.hpp"
#include "util/csv.hpp"

namespace kvshift::app {
namespace {

struct SearchCliOptions {
  std::string scenario, vary, objective, strategy, out, seed;
  bool seed_given = false;
  double tolerance = 0.02;
  int max_probes = 24;
};

std::string clause_values(const sweep::Objective& objective, const sweep::Probe& p) {
  std::string text;
  for (std::size_t i = 0; i < p.results.size(); ++i) {
    char buf[96];
    const auto& v = p.results[i].value;
    if (v)
      std::snprintf(buf, sizeof buf, "%s=%.6g", objective.clauses[i].metric.c_str(), *v);
    else
      std::snprintf(buf, sizeof buf, "%s=(none)", objective.clauses[i].metric.c_str());
    text += (text.empty() ? "" : "  ") + std::string(buf);
  }
  return text;
}

int run(const SearchCliOptions& o) {
  sweep::SweepPlan plan = sweep::make_plan(o.scenario, {});
  // The same seed a sweep of this scenario uses at every point, so the two agree.
  if (o.seed_given) plan.base["seed"] = parse_seed(o.seed, "--seed");
  sweep::SearchSettings s;
  s.knob = sweep::parse_knob(o.vary);
  s.objective = sweep::parse_objective(o.objective);
  s.strategy = sweep::choose_strategy(plan.base, o.strategy);
  s.tolerance = o.tolerance;
  s.max_probes = o.max_probes;
  if (!(o.tolerance > 0)) throw InputError("--tolerance: must be > 0");
  if (o.max_probes < 2) throw InputError("--max-probes: must be at least 2");
  {
    nlohmann::json probe = plan.base;
    sweep::apply_pointer(probe, s.knob.pointer,
                         nullptr);  // the knob must exist before anything runs
  }
  std::printf("search: smallest %s in [%s, %s] with %s for %s\n", s.knob.pointer.c_str(),
              sweep::knob_value_display(s.knob, s.knob.lo).c_str(),
              sweep::knob_value_display(s.knob, s.knob.hi).c_str(), s.objective.text.c_str(),
              s.strategy.c_str());
  std::vector<std::string> header = {"probe", "value", "met"};
  for (const auto& c : s.objective.clauses) header.push_back(c.metric);
  std::string csv = util::csv_row(header) + "\n";
  int n = 0;
  const sweep::SearchResult r =
      sweep::capacity_search(plan, s, shared_cost_factory(), [&](const sweep::Probe& p) {
        ++n;
        std::printf("  probe %2d: %-14s %-8s %s\n", n,
                    sweep::knob_value_display(s.knob, p.value).c_str(), p.met ? "met" : "not met",
                    clause_values(s.objective, p).c_str());
        std::fflush(stdout);
        std::vector<std::string> row = {std::to_string(n), sweep::knob_value_text(s.knob, p.value),
                                        p.met ? "true" : "false"};
        for (const auto& c : p.results)
          row.push_back(c.value ? nlohmann::json(*c.value).dump() : "");
        csv += util::csv_row(row) + "\n";
      });
  if (!o.out.empty()) reports::write_file_atomic(std::filesystem::path(o.out) / "search.csv", csv);
  if (!r.answer) {
    std::printf("not met even at %s: no value in the range meets %s\n",
                sweep::knob_value_display(s.knob, s.knob.hi).c_str(), s.objective.text.c_str());
    return 3;
  }
  std::printf("answer: %s = %s (%s)", s.knob.pointer.c_str(),
              sweep::knob_value_display(s.knob, *r.answer).c_str(),
              sweep::knob_value_text(s.knob, *r.answer).c_str());
  if (r.below)
    std::printf("; %s does not meet it", sweep::knob_value_display(s.knob, *r.below).c_str());
  std::printf("\n");
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<SearchCliOptions>();
  sub.add_option("scenario", o->scenario, "Scenario JSON file (default: the embedded quickstart)");
  sub.add_option("--vary", o->vary, "POINTER=LO..HI, e.g. /cluster/star/bandwidth=1Mbps..100Gbps")
      ->required();
  sub.add_option("--objective", o->objective,
                 "SLO such as \"recovery.p99<=2s\" (clauses joined by &&)")
      ->required();
  sub.add_option("--strategy", o->strategy,
                 "Strategy to size for (default: adaptive if listed, else the first)");
  sub.add_option("--tolerance", o->tolerance,
                 "Stop when HI/LO <= 1+tol (log) or HI-LO <= tol*range")
      ->capture_default_str();
  sub.add_option("--max-probes", o->max_probes, "Most simulations to run")->capture_default_str();
  sub.add_option("--out", o->out, "Also write the probes to OUT/search.csv");
  sub.add_option("--seed", o->seed, "Workload seed (default: the scenario's, as a sweep uses)")
      ->each([o](const std::string&) { o->seed_given = true; });
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"search", "Find the least value of one knob that meets an SLO (bisection; exit 3 if none)", 21,
     setup}};

}  // namespace
}  // namespace kvshift::app
