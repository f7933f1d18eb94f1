// `kvshift testbed SCENARIO --out DIR`: the scenario's moves (or --moves N
// synthetic ones) executed for real between node agents on 127.0.0.1 through
// its shaped links, with the receiver's work run on the CPU backend, each move
// beside the cost model's prediction (testbed.csv, summary.json, testbed.svg).
// `kvshift testbed --probe --out DIR`: the loopback ceiling, then single and
// contending transfers through one shaped link against the closed form and the
// simulator's network model (probe.csv, summary.json, probe.svg); bench/testbed_fidelity.sh
// runs it. Both take --faults. Bad input: InputError naming the flag (exit 2).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_costs.hpp"
#include "apps/kvshift/support_model_inputs.hpp"
#include "cost_model/input_error.hpp"
#include "input/scenario_loader.hpp"
#include "reports/atomic_file.hpp"
#include "testbed/probe.hpp"
#include "testbed/testbed_chart.hpp"
#include "testbed/testbed_run.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

struct TestbedCliOptions {
  std::string scenario, out, faults, seed = "1";
  testbed::ModelInputs inputs;
  std::int64_t moves = 0, max_tokens = 2048;
  int continuation = 32;
  bool force = false, probe = false;
  std::string bytes = "1MB,16MB,64MB", bandwidth = "100Mbps,1Gbps", flows = "1", latency = "1ms",
              ceiling_bytes = "256MB";
  int repeats = 3;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

void publish(const fs::path& out, bool force,
             const std::vector<std::pair<std::string, std::string>>& files,
             const std::vector<fs::path>& inputs = {}) {
  const fs::path tmp = reports::staging_folder(out, force, inputs);
  try {
    for (const auto& [name, text] : files) reports::write_file_atomic(tmp / name, text);
    reports::publish_folder(tmp, out);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

int run_scenario(const TestbedCliOptions& o) {
  if (o.scenario.empty()) throw InputError("SCENARIO: a scenario file is required (or --probe)");
  if (o.moves < 0 || o.moves > 10000) {
    throw InputError("--moves: must be in [1, 10000] (got " + std::to_string(o.moves) + ")");
  }
  testbed::TestbedOptions t;
  t.moves = o.moves;
  t.faults = testbed::parse_faults(o.faults);
  t.inputs = o.inputs;
  t.inputs.seed = parse_seed(o.seed, "--seed");
  t.max_tokens = o.max_tokens;
  t.continuation = o.continuation;
  const input::ScenarioSpec spec = input::load_scenario_file(o.scenario);
  const std::vector<fs::path> inputs{o.scenario, o.inputs.model_dir, o.inputs.predictors,
                                     o.inputs.corpus, o.inputs.mapper};
  reports::staging_folder(o.out, o.force, inputs);  // refuse an existing --out before the work
  const auto costs = make_compute_costs(spec);
  const testbed::TestbedRun run = testbed::run_testbed(
      spec, *costs, t,
      [](const std::string& line) { std::fprintf(stderr, "testbed: %s\n", line.c_str()); });
  std::vector<testbed::ChartPoint> points;
  for (const auto& r : run.rows) {
    if (r.state == "completed") points.push_back({r.predicted_total_s, r.total_s, r.strategy});
  }
  publish(o.out, o.force,
          {{"testbed.csv", testbed::testbed_csv(run.rows)},
           {"summary.json", run.summary.dump(2) + "\n"},
           {"testbed.svg", testbed::measured_vs_predicted_svg(
                               points, spec.name + ": each move's total, measured vs predicted")}},
          inputs);
  std::printf("%s\n", run.summary.dump(2).c_str());
  return run.summary["failed"].get<int>() == 0 ? 0 : 1;
}

int run_probe(const TestbedCliOptions& o) {
  std::vector<testbed::ProbeCase> cases;
  const Seconds latency = parse_duration(o.latency, "--latency");
  if (o.repeats < 1 || o.repeats > 100) throw InputError("--repeats: must be in [1, 100]");
  for (const auto& b : split(o.bytes)) {
    const Bytes size = parse_bytes(b, "--bytes");
    if (size.count <= 0 || size.count > (1ll << 30))
      throw InputError("--bytes: must be in (0, 1GiB]");
    for (const auto& r : split(o.bandwidth)) {
      const BitsPerSecond rate = parse_bandwidth(r, "--bandwidth");
      if (!(rate.value > 0)) throw InputError("--bandwidth: must be > 0 (got \"" + r + "\")");
      for (const auto& f : split(o.flows)) {
        int n = 0;
        try {
          n = std::stoi(f);
        } catch (const std::exception&) {
          n = 0;
        }
        if (n < 1 || n > 64) throw InputError("--flows: must be in [1, 64] (got \"" + f + "\")");
        cases.push_back({size, rate, latency, n});
      }
    }
  }
  const testbed::FaultSpec faults = testbed::parse_faults(o.faults);
  const Bytes ceiling_bytes = parse_bytes(o.ceiling_bytes, "--ceiling-bytes");
  reports::staging_folder(o.out, o.force);
  const double ceiling = testbed::loopback_ceiling(ceiling_bytes, 3);
  std::fprintf(stderr, "testbed probe: loopback ceiling %.3f Gbps\n", ceiling / 1e9);
  const auto rows = testbed::run_probe(cases, o.repeats, faults);
  nlohmann::json s;
  s["loopback_ceiling_bps"] = ceiling;
  s["ceiling_transfer_bytes"] = ceiling_bytes.count;
  s["faults"] = testbed::describe(faults);
  s["address"] = "127.0.0.1";
  s["cases"] = cases.size();
  s["repeats"] = o.repeats;
  std::vector<testbed::ChartPoint> points;
  for (const auto& r : rows) {
    points.push_back({r.simulator_s, r.measured_s, std::to_string(r.c.flows) + " flow(s)"});
  }
  publish(o.out, o.force,
          {{"probe.csv", testbed::probe_csv(rows)},
           {"summary.json", s.dump(2) + "\n"},
           {"probe.svg", testbed::measured_vs_predicted_svg(
                             points, "shaped loopback transfers vs the network model")}});
  std::printf("%s\n", s.dump(2).c_str());
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<TestbedCliOptions>();
  sub.add_option("scenario", o->scenario, "Scenario file (not with --probe)");
  sub.add_option("--out", o->out, "Output folder (must not exist unless --force)")->required();
  sub.add_flag("--force", o->force, "Replace an existing --out");
  sub.add_option("--moves", o->moves,
                 "Synthetic moves drawn from the scenario (default: its drains, one per strategy)");
  sub.add_option("--faults", o->faults,
                 "Send-path faults: drop=P,corrupt=P,disconnect=P,delay=D[,delay_p=P],"
                 "stall=D[,stall_p=P],seed=N");
  sub.add_option("--seed", o->seed,
                 "Seed of the synthetic moves' nodes, token ids and random weights (each move's "
                 "context is the prompt of the scenario's next simulated request)")
      ->capture_default_str();
  add_model_input_options(sub, o->inputs, "contexts");
  sub.add_option("--max-tokens", o->max_tokens, "Clip drawn contexts to this many tokens")
      ->capture_default_str();
  sub.add_option("--continue", o->continuation,
                 "Tokens the request decodes after each move on the receiver and on the source "
                 "(greedy and seeded samples): their agreement and the move's real ΔNLL on that "
                 "text, beside the ΔNLL the simulator charges; 0: not measured")
      ->capture_default_str();
  sub.add_flag("--probe", o->probe, "Measure one shaped link instead of a scenario");
  sub.add_option("--bytes", o->bytes, "--probe: transfer sizes")->capture_default_str();
  sub.add_option("--bandwidth", o->bandwidth, "--probe: shaped rates")->capture_default_str();
  sub.add_option("--flows", o->flows, "--probe: flows contending on the link")
      ->capture_default_str();
  sub.add_option("--latency", o->latency, "--probe: one-way latency")->capture_default_str();
  sub.add_option("--repeats", o->repeats, "--probe: runs per case")->capture_default_str();
  sub.add_option("--ceiling-bytes", o->ceiling_bytes, "--probe: size of the unshaped ceiling run")
      ->capture_default_str();
  return [o] {
    if (o->probe) {
      if (!o->scenario.empty()) throw InputError("--probe: takes no SCENARIO");
      return run_probe(*o);
    }
    return run_scenario(*o);
  };
}

const RegisterCommand kRegister{
    {"testbed", "Execute a scenario's moves for real over loopback sockets, against the model", 62,
     setup}};

}  // namespace
}  // namespace kvshift::app
