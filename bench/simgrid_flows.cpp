// SimGrid's counterpart of `kvshift flows FILE.json`, as a command of its own
// for the process-level benchmark (bench/flows_vs_simgrid.sh): reads the same
// flows file (input/flows_file.hpp, streamed), routes every transfer the way
// kvshift does (the topology's lowest-id shortest path, or the file's explicit
// route), runs the flow set on SimGrid's plain max-min model
// (tests/sim/simgrid/simgrid_runner.hpp: correction factors 1, route latency as
// a pure delay, routes declared once per (source, destination) pair, only the
// communications in flight held), and prints the same JSON lines, in input
// order: {"id": "t1", "finish_s": 16.001}. The parsed file is dropped before
// SimGrid's platform is built, so the peak memory is SimGrid's plus the ids.
// Left out: "ecmp" (refused: exit 2) and per-transfer caps are supported as the
// runner models them (a private link per capped transfer). Usage:
//   simgrid_flows FILE.json
#include <charconv>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"
#include "input/flows_file.hpp"
#include "tests/sim/simgrid/simgrid_runner.hpp"

namespace {

using namespace kvshift;
using sim::testing::NetCase;

/// The file as a NetCase (routes on the first transfer of each pair only, which is
/// all the runner reads) and the transfers' ids.
NetCase to_case(const input::FlowsFile& f, std::vector<std::string>& ids) {
  NetCase c;
  c.name = "flows";
  const sim::Topology& t = f.topology;
  c.nodes = static_cast<int>(t.node_count());
  for (sim::LinkId l = 0; l < t.link_count(); ++l) {
    const sim::ClusterLink& s = t.link(l);
    c.links.push_back({static_cast<int>(s.a), static_cast<int>(s.b), s.bandwidth.value,
                       s.latency.ns, s.duplex == sim::Duplex::kHalf});
  }
  std::map<std::pair<int, int>, std::int64_t> latency_of;  // routed pairs
  c.flows.reserve(f.transfers.size());
  ids.reserve(f.transfers.size());
  for (const input::FlowTransfer& x : f.transfers) {
    sim::testing::NetFlow n;
    n.src = static_cast<int>(x.src);
    n.dst = static_cast<int>(x.dst);
    n.bytes = x.bytes.count;
    n.start_ns = x.start.ns;
    if (x.max_rate) n.cap_bps = x.max_rate->value;
    const bool first = x.route || n.cap_bps > 0 || !latency_of.count({n.src, n.dst});
    if (first) {
      const sim::Route r = x.route ? t.make_route(x.src, x.dst, *x.route) : *t.route(x.src, x.dst);
      for (const sim::Hop& h : r.hops) n.route.emplace_back(static_cast<int>(h.link), h.forward);
      n.route_latency_ns = r.latency.ns;
      if (!x.route) latency_of[{n.src, n.dst}] = r.latency.ns;
    } else {
      n.route_latency_ns = latency_of[{n.src, n.dst}];
    }
    c.flows.push_back(std::move(n));
    ids.push_back(x.id);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: simgrid_flows FILE.json\n");
    return 2;
  }
  std::vector<NetCase> cases(1);
  std::vector<std::string> ids;
  try {
    const input::FlowsFile f = input::load_flows_file(argv[1]);
    if (f.ecmp_seed) {
      std::fprintf(stderr, "%s: /ecmp: not supported by simgrid_flows\n", argv[1]);
      return 2;
    }
    cases[0] = to_case(f, ids);
  } catch (const InputError& e) {
    std::fprintf(stderr, "simgrid_flows: %s\n", e.what());
    return 2;
  }
  sim::testing::SimgridOptions options;
  options.release_finished = true;
  const sim::testing::SimgridRun run = sim::testing::run_simgrid(cases, options);
  std::string line;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, run.finish_s[0][k]);
    line.assign("{\"id\": ").append(nlohmann::json(ids[k]).dump()).append(", \"finish_s\": ");
    line.append(buf, r.ptr).append("}\n");
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}
