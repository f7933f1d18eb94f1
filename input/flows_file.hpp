// Flows files: a cluster and a set of transfers for `kvshift flows`, which runs
// them through the network model alone (sim::Network). Format:
//   {"cluster": {...},                                   (a scenario's "cluster" section)
//    "transfers": [{"id": "t1", "src": "A", "dst": "B", "bytes": 1000000000,
//                   "start": "0.5s", "route": ["A-B"], "max_rate": "400Mbps"}, ...],
//    "ecmp": true}                                       (optional)
// The cluster is read exactly as a scenario's: explicit "nodes" ({"name", "kind"})
// and "links" ({"name", "a", "b", "bandwidth", "latency", "duplex"}), or a
// generator (star, ring, leaf_spine, multi_site; names as sim/generators.hpp
// makes them) plus explicit additions. A transfer's bytes are an integer or a
// unit string; start defaults to 0s; route (link names) and max_rate are
// optional. "ecmp": true or {"seed": N} (default off) spreads routed transfers
// over the equal-cost shortest paths, one path per transfer picked by a hash of
// the seed and the transfer's position (sim::NetworkOptions::ecmp); off, every
// transfer takes the lowest-id shortest path. Every problem is reported with
// its JSON path. A transfer whose source and destination are not connected is
// an input error that names both nodes (the file describes a static topology,
// so the stall it would cause in the simulator is known before running).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "input/json_reader.hpp"
#include "sim/network.hpp"

namespace kvshift::input {

/// One transfer of a flows file, resolved against its topology.
struct FlowTransfer {
  std::string id;
  sim::NodeId src = 0;
  sim::NodeId dst = 0;
  Bytes bytes;
  sim::SimTime start;
  std::optional<std::vector<sim::LinkId>> route;
  std::optional<BitsPerSecond> max_rate;
};

struct FlowsFile {
  sim::Topology topology;
  std::vector<FlowTransfer> transfers;
  std::optional<std::uint64_t> ecmp_seed;  ///< set: ECMP on with this seed
};

/// Reads a flows document; throws InputError listing every problem ("source: /path: ...").
FlowsFile parse_flows(const Json& doc, std::string_view source);
/// Reads and parses a flows file, streaming its transfers (input/json_stream.hpp):
/// memory grows with the topology and the parsed transfers, never with a DOM of the file.
FlowsFile load_flows_file(const std::string& path);

/// How one transfer ended.
struct FlowOutcome {
  std::string id;
  sim::TransferState state = sim::TransferState::kPending;
  sim::SimTime finish;
  std::string reason;  ///< why it did not finish
};

/// Runs every transfer through sim::Network; outcomes in input order.
std::vector<FlowOutcome> simulate_flows(FlowsFile& flows);

}  // namespace kvshift::input
