// ReplicaStreams: the flushes that carry a GPU's new KV to its requests'
// replicas. One decode pass sends one flush per replica node; the transfer
// engine posts its descriptors first; it crosses the network, or the GPU's
// host link when the replica is its own node's host DRAM. A failed path loses
// the flush, and so does a stall with a timeout; a stall without one holds it
// until the path is repaired. Flush slots are reused, so streaming allocates
// nothing once the run is warm.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "cost_model/transfer_engine.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/serving/host_links.hpp"
#include "sim/serving/path_faults.hpp"
#include "sim/simulator.hpp"

namespace kvshift::sim {

class ReplicaStreams {
 public:
  /// One request's new tokens in a flush, of its epoch (a request that lost its state since
  /// has moved on to a later one).
  struct Part {
    std::uint64_t request;
    std::int64_t tokens;
    std::uint32_t epoch;
  };
  /// What a flush keeps of each token: `layers` layers of a `share` of the tokens,
  /// `per_token` bytes in all.
  struct Kept {
    int layers = 0;
    double share = 1;
    std::int64_t per_token = 0;
  };
  /// A flush that reached `replica`: its parts, `per_token` bytes a token.
  using Landed = std::function<void(int replica, std::int64_t per_token, std::span<const Part>)>;

  struct Parts {
    Simulator& sim;
    Fabric& fabric;
    HostLinks& links;
    PathFaults& faults;                ///< holds a stalled path's flush
    const std::vector<bool>& node_up;  ///< by node
  };
  /// `stall_timeout`: whether a stalled path times its sends out (they are lost) rather than
  /// holding them.
  ReplicaStreams(Parts parts, const cost_model::TransferEngine& engine, bool stall_timeout,
                 Landed landed);

  /// Sends `due` (replica node, part) from `gpu` on `node`: one flush per replica node, in
  /// replica order. Reorders `due`.
  void send(int gpu, int node, const Kept& kept, std::span<std::pair<int, Part>> due);

 private:
  struct Flush {
    int replica = -1;
    std::int64_t per_token = 0;
    std::vector<Part> parts;
  };
  /// Transfer-engine descriptors of `tokens` tokens of kept KV.
  std::int64_t descriptors(const Kept& kept, std::int64_t tokens) const;
  void post(int gpu, int node, int replica, std::int64_t bytes, Fabric::Done done);
  void on_flushed(std::uint32_t slot, bool delivered);

  Parts p_;
  const cost_model::TransferEngine& engine_;
  bool stall_timeout_;
  Landed landed_;
  /// Flushes in flight, by slot (a Done then names only its slot and fits std::function's
  /// inline buffer).
  std::vector<Flush> flushes_;
  std::vector<std::uint32_t> free_;
};

}  // namespace kvshift::sim
