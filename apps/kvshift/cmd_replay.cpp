// `kvshift replay SCENARIO --out DIR`: the scenario served for real by 2–4 node
// processes on loopback (testbed/replay_run.hpp), once per strategy, then
// simulated with the scenario's cost source, and the two set side by side:
// fidelity.md / fidelity.csv (per strategy and metric, the error against the
// targets), the replay's requests.csv and recoveries.csv (the simulator's
// columns), simulated_*.csv, quality.csv (what each move did to its request's
// text) and summary.json. Bad input: InputError naming the flag or field (exit 2).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "apps/kvshift/support_model_inputs.hpp"
#include "cost_model/input_error.hpp"
#include "input/scenario_loader.hpp"
#include "reports/atomic_file.hpp"
#include "reports/record_csv.hpp"
#include "sim/serving/scenario_run.hpp"
#include "testbed/replay_fidelity.hpp"
#include "testbed/replay_run.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

struct ReplayCliOptions {
  std::string scenario, out, seed = "1", strategies;
  testbed::ModelInputs inputs;
  int continuation = 16;
  bool force = false;
};

std::vector<cost_model::Strategy> parse_strategies(const std::string& list) {
  std::vector<cost_model::Strategy> out;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    const auto s = cost_model::strategy_named(name);
    if (!s) throw InputError("--strategies: unknown strategy \"" + name + "\"");
    out.push_back(*s);
  }
  return out;
}

std::string quality_csv(const std::vector<testbed::ReplayRun>& runs) {
  std::ostringstream out;
  out << "strategy,request,trigger,from,to,executed,context_tokens,charged_delta_nll,"
         "continuation_tokens,greedy_agreement,sampled_agreement,real_delta_nll\n";
  for (const testbed::ReplayRun& run : runs) {
    for (std::size_t i = 0; i < run.moves.size(); ++i) {
      const sim::MoveRecord& m = run.moves[i];
      const testbed::MoveQuality& q = run.quality[i];
      if (q.steps == 0) continue;
      out << cost_model::strategy_name(run.strategy) << ',' << m.request << ','
          << sim::move_trigger_name(m.trigger) << ',' << m.from << ',' << m.to << ',' << m.strategy
          << ',' << m.context_tokens << ',' << format_number("%.6g", m.delta_nll) << ',' << q.steps
          << ',' << format_number("%.4f", q.greedy_agreement) << ','
          << format_number("%.4f", q.sampled_agreement) << ',' << format_number("%.6g", q.delta_nll)
          << '\n';
    }
  }
  return out.str();
}

nlohmann::json summary(const input::ScenarioSpec& spec, const testbed::MoveSetup& setup,
                       const cost_model::ComputeCosts& costs,
                       const std::vector<testbed::ReplayRun>& runs,
                       const std::vector<testbed::FidelityRow>& rows, const ReplayCliOptions& o) {
  nlohmann::json s;
  s["scenario"] = spec.name;
  s["nodes"] = testbed::gpu_names(spec);
  s["address"] = "127.0.0.1";
  s["weights"] = setup.weights_source;
  if (!setup.predictors_source.empty()) s["predictors"] = setup.predictors_source;
  s["proxykv_scores"] = setup.proxykv_scores;
  s["prompts"] = setup.corpus.empty() ? "seeded random token ids (no --corpus)"
                                      : "text from " + o.inputs.corpus;
  s["compute_source"] = nlohmann::json::array();
  for (const auto& src : costs.sources()) s["compute_source"].push_back(src.op + ": " + src.source);
  s["continuation_tokens"] = o.continuation;
  for (const testbed::ReplayRun& run : runs) {
    nlohmann::json r;
    r["wall_s"] = run.wall_s;
    std::map<std::string, int> outcomes, moves;
    for (const auto& q : run.requests) ++outcomes[sim::request_outcome_name(q.outcome)];
    for (const auto& m : run.moves) ++moves[sim::move_outcome_name(m.outcome)];
    r["requests"] = outcomes;
    r["moves"] = moves;
    r["notes"] = run.notes;
    s["runs"][cost_model::strategy_name(run.strategy)] = r;
  }
  s["ranking"] = {testbed::strategy_ranking(rows, "move_p50"),
                  testbed::strategy_ranking(rows, "e2e_p99")};
  s["quality_note"] =
      "after the run, each moved request's receiver decodes " + std::to_string(o.continuation) +
      " tokens from the cache it rebuilt and from a prefill of the same context (the source's "
      "KV, had the request stayed), from the same next token: greedy and seeded-sample "
      "agreement, and the receiver's mean NLL of the source's greedy text minus the source's";
  return s;
}

int run_replay_command(const ReplayCliOptions& o) {
  if (o.continuation < 0 || o.continuation > 4096) {
    throw InputError("--continue: must be in [0, 4096] tokens");
  }
  testbed::ReplayOptions ro;
  ro.inputs = o.inputs;
  ro.inputs.seed = parse_seed(o.seed, "--seed");
  ro.continuation = o.continuation;
  ro.strategies = parse_strategies(o.strategies);
  input::ScenarioSpec spec = input::load_scenario_file(o.scenario);
  testbed::check_replayable(spec);
  spec.policies.strategies = testbed::replay_strategies(spec, ro.strategies);
  ro.strategies = spec.policies.strategies;
  const std::vector<fs::path> inputs{o.scenario, o.inputs.model_dir, o.inputs.predictors,
                                     o.inputs.corpus, o.inputs.mapper};
  reports::staging_folder(o.out, o.force, inputs);  // refuse an existing --out before the work
  const auto costs = make_compute_costs(spec);
  const testbed::MoveSetup setup = testbed::load_setup(spec, ro.inputs);
  const auto progress = [](const std::string& line) {
    std::fprintf(stderr, "replay: %s\n", line.c_str());
  };
  // Served first: the node processes are forked from this one while it runs no thread.
  const std::vector<testbed::ReplayRun> runs =
      testbed::run_replay(spec, setup, *costs, ro, progress);
  progress(
      "simulating the same scenario with " +
      std::string(costs->sources().empty() ? "its cost source" : costs->sources().front().source));
  const std::vector<sim::RunResult> simulated = sim::run_scenario(spec, *costs);
  const std::vector<testbed::FidelityRow> rows = testbed::fidelity_rows(simulated, runs);

  std::string requests = reports::requests_csv_header(), moves = reports::recoveries_csv_header();
  std::string sim_requests = requests, sim_moves = moves;
  for (const testbed::ReplayRun& run : runs) {
    const std::string name = cost_model::strategy_name(run.strategy);
    for (const auto& r : run.requests) reports::append_request_row(requests, name, r);
    for (const auto& m : run.moves) reports::append_move_row(moves, name, m);
  }
  for (const sim::RunResult& run : simulated) {
    for (const auto& r : run.requests) reports::append_request_row(sim_requests, run.strategy, r);
    for (const auto& m : run.moves) reports::append_move_row(sim_moves, run.strategy, m);
  }
  const nlohmann::json s = summary(spec, setup, *costs, runs, rows, o);
  const std::string table = testbed::fidelity_markdown(rows);
  std::string ranking;
  for (const auto& r : s["ranking"]) {
    ranking += "ranking by " + r["metric"].get<std::string>() + ": simulator " +
               r["simulator"].dump() + ", replay " + r["replay"].dump() +
               (r["identical"].get<bool>() ? " (identical)\n" : " (differ)\n");
  }
  const fs::path tmp = reports::staging_folder(o.out, o.force, inputs);
  try {
    const std::vector<std::pair<std::string, std::string>> files{
        {"requests.csv", requests},
        {"recoveries.csv", moves},
        {"simulated_requests.csv", sim_requests},
        {"simulated_recoveries.csv", sim_moves},
        {"quality.csv", quality_csv(runs)},
        {"fidelity.csv", testbed::fidelity_csv(rows)},
        {"fidelity.md",
         "# " + spec.name + ": simulator against replay\n\n" + table + "\n" + ranking},
        {"summary.json", s.dump(2) + "\n"}};
    for (const auto& [name, text] : files) reports::write_file_atomic(tmp / name, text);
    reports::publish_folder(tmp, o.out);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  std::printf("%s\n%s\nwrote %s\n", table.c_str(), ranking.c_str(), o.out.c_str());
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<ReplayCliOptions>();
  sub.add_option("scenario", o->scenario, "Scenario file (2-4 GPU nodes, one GPU each)")
      ->required();
  sub.add_option("--out", o->out, "Output folder (must not exist unless --force)")->required();
  sub.add_flag("--force", o->force, "Replace an existing --out");
  sub.add_option("--strategies", o->strategies,
                 "Comma-separated strategies to replay, one run each (default: the scenario's "
                 "concrete ones)");
  add_model_input_options(sub, o->inputs, "prompts");
  sub.add_option("--continue", o->continuation,
                 "Tokens each moved request decodes afterwards to measure the move's real quality "
                 "cost; 0: not measured")
      ->capture_default_str();
  sub.add_option("--seed", o->seed, "Seed of the prompts' token ids and of random weights")
      ->capture_default_str();
  return [o] { return run_replay_command(*o); };
}

const RegisterCommand kRegister{
    {"replay",
     "Serve a small scenario for real (node processes on loopback) and check the "
     "simulator against it",
     63, setup}};

}  // namespace
}  // namespace kvshift::app
