// `kvshift flows FILE.json`: runs a set of transfers over a topology through
// the network model alone (max-min sharing, latency first) and prints one JSON
// line per transfer, in input order: {"id": "t1", "finish_s": 16.001}, with
// the shortest decimal that round-trips the double (input::write_flow_lines: the
// lines go out in chunks as they are formed). A transfer that cannot
// finish (not reachable from the file's static topology) never gets here: the
// file is rejected with exit code 2 naming both nodes. The file is read as a
// stream (input/json_stream.hpp: one transfer's JSON at a time, never a DOM
// of the whole file); bad input is exit 2 with every problem's JSON path.
// "ecmp": true | {"seed": N} in the file spreads transfers over equal-cost paths.
#include <CLI/CLI.hpp>
#include <iostream>

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

int run_flows(const FlowsOptions& o) {
  if (o.out_given) reports::check_output_file(o.out, "--out");  // before any work
  input::FlowsFile flows = input::load_flows_file(o.file);
  const input::FlowResults results = input::run_flows(flows);
  std::string text;  // kept only for --out; stdout gets the lines in chunks
  input::write_flow_lines(flows, results, [&](std::string_view chunk) {
    std::cout.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (o.out_given) text.append(chunk);
  });
  std::cout.flush();
  if (o.out_given) reports::write_file_atomic(o.out, text);
  return results.all_finished() ? 0 : 1;
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
