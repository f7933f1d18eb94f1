// `kvshift flows FILE.json`: runs a set of transfers over a topology through
// the network model alone (max-min sharing, latency first) and prints one JSON
// line per transfer, in input order: {"id": "t1", "finish_s": 16.001}, with
// the shortest decimal that round-trips the double. A transfer that cannot
// finish (not reachable from the file's static topology) never gets here: the
// file is rejected with exit code 2 naming both nodes. The file is read as a
// stream (input/json_stream.hpp: one transfer's JSON at a time, never a DOM
// of the whole file); bad input is exit 2 with every problem's JSON path.
// "ecmp": true | {"seed": N} in the file spreads transfers over equal-cost paths.
#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/kvshift/command.hpp"
#include "input/flows_file.hpp"
#include "reports/atomic_file.hpp"

namespace kvshift::app {
namespace {

struct FlowsOptions {
  std::string file;
  std::string out;
  bool out_given = false;  ///< --out was typed (an empty one is refused)
};

std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

int run_flows(const FlowsOptions& o) {
  if (o.out_given) reports::check_output_file(o.out, "--out");  // before any work
  input::FlowsFile flows = input::load_flows_file(o.file);
  const std::vector<input::FlowOutcome> outcomes = input::simulate_flows(flows);
  std::ostringstream text;
  bool all_finished = true;
  for (const input::FlowOutcome& f : outcomes) {
    text << "{\"id\": " << nlohmann::json(f.id).dump() << ", \"finish_s\": ";
    if (f.state == sim::TransferState::kFinished) {
      text << shortest(f.finish.seconds()) << "}\n";
    } else {
      all_finished = false;
      text << "null, \"state\": \"" << sim::to_string(f.state)
           << "\", \"reason\": " << nlohmann::json(f.reason).dump() << "}\n";
    }
  }
  std::cout << text.str();
  if (o.out_given) reports::write_file_atomic(o.out, text.str());
  return all_finished ? 0 : 1;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<FlowsOptions>();
  sub.add_option("file", o->file,
                 "Flows file: nodes, links (or a generator), transfers, optional ecmp")
      ->required();
  sub.add_option("--out", o->out, "Also write the JSON lines to this file")
      ->each([o](const std::string&) { o->out_given = true; });
  return [o] { return run_flows(*o); };
}

const RegisterCommand kRegister{
    {"flows", "Run transfers over a topology through the network model alone (finish times)", 50,
     setup}};

}  // namespace
}  // namespace kvshift::app
