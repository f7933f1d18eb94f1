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
// transfer takes the lowest-id shortest path; a scenario's "cluster" may carry
// the same "ecmp" instead (one of the two). Every problem is reported with
// its JSON path. A transfer whose source and destination are not connected is
// an input error that names both nodes (the file describes a static topology,
// so the stall it would cause in the simulator is known before running).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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

/// How every transfer of a run ended, by input position (9 bytes a transfer).
struct FlowResults {
  std::vector<sim::SimTime> finish;            ///< when it finished (or ended otherwise)
  std::vector<sim::TransferState> state;       ///< kFinished, or how else it stands at the end
  std::map<std::size_t, std::string> reasons;  ///< why, for those that did not finish
  bool all_finished() const { return reasons.empty(); }
};

/// Runs every transfer through sim::Network. Transfers are handed to the network as
/// simulated time reaches their starts (transfer i no later than its start and after
/// transfer i-1, so its TransferId is i), and an ended transfer's record is recycled: the
/// run's memory follows the transfers in flight, plus FlowResults.
FlowResults run_flows(FlowsFile& flows);

/// The lines `kvshift flows` prints, one per transfer in input order:
/// {"id": "t1", "finish_s": 16.001} (the shortest decimal that round-trips the double), or
/// {"id": "t1", "finish_s": null, "state": "running", "reason": "..."} for one that did not
/// finish; handed to `sink` in chunks of about 64 KiB, so no copy of the whole output is held.
void write_flow_lines(const FlowsFile& flows, const FlowResults& results,
                      const std::function<void(std::string_view)>& sink);

/// How one transfer ended.
struct FlowOutcome {
  std::string id;
  sim::TransferState state = sim::TransferState::kPending;
  sim::SimTime finish;
  std::string reason;  ///< why it did not finish
};

/// run_flows() as one record per transfer, in input order.
std::vector<FlowOutcome> simulate_flows(FlowsFile& flows);

}  // namespace kvshift::input
