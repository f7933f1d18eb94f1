// `kvshift search SCENARIO --vary POINTER=LO..HI --objective EXPR [--want least|most]`:
// capacity planning - the least (or largest) value of one knob (bandwidth,
// replicas, request rate, ...) for which one strategy meets an SLO over its
// summary metrics. Both ends are probed; a non-monotone objective is reported
// and searched on a grid (see sweep/capacity_search.hpp). Every probe is
// printed with the fallbacks, unfinished and failed moves it had.
// Exit 0: found; 3: no probed value meets it; 2: bad input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "reports/atomic_file.hpp"
#include "sweep/capacity_search.hpp"
#include "util/csv.hpp"

namespace kvshift::app {
namespace {

struct SearchCliOptions {
  std::string scenario, vary, objective, strategy, out, seed, want = "least";
  bool seed_given = false;
  double tolerance = 0.02;
  int max_probes = 24;
};

std::string clause_values(const sweep::Objective& objective, const sweep::Probe& p) {
  std::string text;
  for (std::size_t i = 0; i < p.results.size(); ++i) {
    const auto& v = p.results[i].value;
    text += (text.empty() ? "" : "  ") + objective.clauses[i].metric + "=" +
            (v ? format_number("%.6g", *v) : "(none)");
  }
  return text;
}

// "full_kv 2, token_replay 4": every done move by the strategy that executed it.
std::string executed_text(const sweep::ProbeMoves& m) {
  std::string text;
  for (const auto& [name, count] : m.executed) {
    if (count > 0) text += (text.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  return text;
}

// What the moves did, after the clause values: nothing when they all ran as asked and ended.
std::string move_notes(const sweep::ProbeMoves& m) {
  std::string text;
  if (m.fallbacks > 0) {
    const std::string ran = executed_text(m);
    text += "  fallbacks=" + std::to_string(m.fallbacks) +
            (ran.empty() ? "" : " (done moves ran " + ran + ")");
  }
  if (m.unfinished > 0) text += "  unfinished=" + std::to_string(m.unfinished);
  if (m.failed > 0) text += "  failed=" + std::to_string(m.failed);
  return text;
}

// "full_kv:2;token_replay:4": every done move by the strategy that executed it.
std::string executed_cell(const sweep::ProbeMoves& m) {
  std::string text;
  for (const auto& [name, count] : m.executed) {
    text += (text.empty() ? "" : ";") + name + ":" + std::to_string(count);
  }
  return text;
}

std::string stretches_text(const sweep::Knob& k, const std::vector<sweep::MetStretch>& met) {
  std::string text;
  for (const sweep::MetStretch& m : met) {
    text += (text.empty() ? "" : ", ") + sweep::knob_value_display(k, m.from);
    if (m.to != m.from) text += ".." + sweep::knob_value_display(k, m.to);
  }
  return text;
}

// The answer's caveats: the moves that did not run as the searched strategy, and open ones.
void print_answer_moves(const sweep::Probe& p, const std::string& strategy) {
  const sweep::ProbeMoves& m = p.moves;
  if (m.fallbacks > 0) {
    const std::string ran = executed_text(m);
    std::printf(
        "note: at the answer %lld of %s's moves fell back to another strategy%s, so its metrics "
        "are not %s's alone (add \"&& moves.fallbacks<=0\" to the objective to require that "
        "%s itself did every move)\n",
        (long long)m.fallbacks, strategy.c_str(),
        ran.empty() ? "" : (" (done moves ran " + ran + ")").c_str(), strategy.c_str(),
        strategy.c_str());
  }
  if (m.unfinished > 0) {
    std::printf(
        "note: at the answer %lld move(s) were unfinished when the run ended (their latency "
        "counts at its lower bound, the time they had run)\n",
        (long long)m.unfinished);
  }
  if (m.failed > 0) std::printf("note: at the answer %lld move(s) failed\n", (long long)m.failed);
}

// The line after the answer when it is an end of the range, and which way the other end points.
void print_end_hint(const sweep::SearchSettings& s, const sweep::SearchResult& r) {
  const sweep::Knob& k = s.knob;
  const bool least = s.want == sweep::Want::kLeast;
  const double other = least ? k.hi : k.lo;
  const sweep::Probe* far = sweep::probe_at(r, other);
  if (!far || far->met) return;
  std::printf(
      "note: met at %s but not at %s: %s values make it harder; --want %s finds the %s value "
      "that still meets it\n",
      sweep::knob_value_display(k, least ? k.lo : k.hi).c_str(),
      sweep::knob_value_display(k, other).c_str(), least ? "larger" : "smaller",
      least ? "most" : "least", least ? "largest" : "least");
}

void print_not_monotone(bool grid_follows) {
  std::printf(
      "not monotone: in knob order the probes switch between met and not met more than once, so "
      "bisection could answer any switch%s\n",
      grid_follows ? "; probing an even grid over the range instead" : "");
}

// The search as asked, checked before anything runs (the knob must exist, the strategy must run).
sweep::SearchSettings settings_from(const SearchCliOptions& o, const sweep::SweepPlan& plan) {
  sweep::SearchSettings s;
  s.knob = sweep::parse_knob(o.vary);
  s.objective = sweep::parse_objective(o.objective);
  s.strategy = sweep::choose_strategy(plan.base, o.strategy);
  s.want = sweep::parse_want(o.want);
  if (o.seed_given && s.knob.pointer == "/seed")
    throw InputError("--seed and --vary " + o.vary + ": both set the seed; drop one");
  s.tolerance = o.tolerance;
  s.max_probes = o.max_probes;
  if (!(o.tolerance > 0)) throw InputError("--tolerance: must be > 0");
  if (o.max_probes < 2) throw InputError("--max-probes: must be at least 2");
  nlohmann::json probe = plan.base;
  sweep::apply_pointer(probe, s.knob.pointer, nullptr);
  sweep::check_strategy(plan, s.strategy);
  return s;
}

std::string csv_header(const sweep::Objective& objective) {
  std::vector<std::string> header = {"probe", "value", "met"};
  for (const auto& c : objective.clauses) header.push_back(c.metric);
  for (const char* h : {"grid", "fallbacks", "executed", "unfinished_moves", "failed_moves"})
    header.emplace_back(h);
  return util::csv_row(header) + "\n";
}

std::string csv_line(const sweep::Knob& knob, int n, const sweep::Probe& p) {
  std::vector<std::string> row = {std::to_string(n), sweep::knob_value_text(knob, p.value),
                                  p.met ? "true" : "false"};
  for (const auto& c : p.results) row.push_back(c.value ? nlohmann::json(*c.value).dump() : "");
  row.push_back(p.grid ? "true" : "false");
  row.push_back(std::to_string(p.moves.fallbacks));
  row.push_back(executed_cell(p.moves));
  row.push_back(std::to_string(p.moves.unfinished));
  row.push_back(std::to_string(p.moves.failed));
  return util::csv_row(row) + "\n";
}

// The outcome after the probes: the grid's finding, then the answer and its caveats; the exit code.
int print_outcome(const sweep::SearchSettings& s, const sweep::SearchResult& r, bool announced) {
  const sweep::Knob& k = s.knob;
  if (!r.monotone) {
    if (!announced) print_not_monotone(false);  // the probe budget left no grid to add
    std::printf("grid: met at %s (%zu values probed; between them it is not known)\n",
                stretches_text(k, r.met_stretches).c_str(), r.probes.size());
  }
  if (!r.answer) {
    std::printf(
        "no answer: not met at any of the %zu values probed in [%s, %s] (ends included): "
        "no value in the range is known to meet %s\n",
        r.probes.size(), sweep::knob_value_display(k, k.lo).c_str(),
        sweep::knob_value_display(k, k.hi).c_str(), s.objective.text.c_str());
    return 3;
  }
  const bool least = s.want == sweep::Want::kLeast;
  std::printf("answer%s: %s = %s (%s)", r.monotone ? "" : " (grid, not monotone)",
              k.pointer.c_str(), sweep::knob_value_display(k, *r.answer).c_str(),
              sweep::knob_value_text(k, *r.answer).c_str());
  if (r.nearest_unmet) {
    std::printf("; %s does not meet it", sweep::knob_value_display(k, *r.nearest_unmet).c_str());
  } else if (*r.answer == (least ? k.lo : k.hi)) {
    std::printf("; %s itself meets it (%s values were not tried)", least ? "LO" : "HI",
                least ? "smaller" : "larger");
  }
  std::printf("\n");
  if (r.monotone && !r.nearest_unmet) print_end_hint(s, r);
  if (const sweep::Probe* p = sweep::probe_at(r, *r.answer)) print_answer_moves(*p, s.strategy);
  return 0;
}

int run(const SearchCliOptions& o) {
  sweep::SweepPlan plan = sweep::make_plan(o.scenario, {});
  // The same seed a sweep of this scenario uses at every point, so the two agree.
  if (o.seed_given) plan.base["seed"] = parse_seed(o.seed, "--seed");
  const sweep::SearchSettings s = settings_from(o, plan);
  std::printf("search: %s %s in [%s, %s] with %s for %s\n",
              s.want == sweep::Want::kLeast ? "least" : "largest", s.knob.pointer.c_str(),
              sweep::knob_value_display(s.knob, s.knob.lo).c_str(),
              sweep::knob_value_display(s.knob, s.knob.hi).c_str(), s.objective.text.c_str(),
              s.strategy.c_str());
  std::string csv = csv_header(s.objective);
  int n = 0;
  bool announced = false;
  const sweep::SearchResult r =
      sweep::capacity_search(plan, s, shared_cost_factory(), [&](const sweep::Probe& p) {
        ++n;
        if (p.grid && !announced) {
          announced = true;
          print_not_monotone(true);
        }
        std::printf("  probe %2d: %-14s %-8s %s%s\n", n,
                    sweep::knob_value_display(s.knob, p.value).c_str(), p.met ? "met" : "not met",
                    clause_values(s.objective, p).c_str(), move_notes(p.moves).c_str());
        std::fflush(stdout);
        csv += csv_line(s.knob, n, p);
      });
  if (!o.out.empty()) reports::write_file_atomic(std::filesystem::path(o.out) / "search.csv", csv);
  return print_outcome(s, r, announced);
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<SearchCliOptions>();
  sub.add_option("scenario", o->scenario, "Scenario JSON file (default: the embedded quickstart)");
  sub.add_option("--vary", o->vary, "POINTER=LO..HI, e.g. /cluster/star/bandwidth=1Mbps..100Gbps")
      ->required();
  sub.add_option("--objective", o->objective,
                 "SLO such as \"recovery.p99<=2s\" (clauses joined by &&)")
      ->required();
  sub.add_option("--want", o->want,
                 "least: the least value that meets the SLO (a bandwidth, a replica count); "
                 "most: the largest (a request rate, a latency)")
      ->capture_default_str();
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
    {"search",
     "Find the least (or, --want most, largest) value of one knob that meets an SLO (exit 3 if "
     "none)",
     21, setup}};

}  // namespace
}  // namespace kvshift::app
