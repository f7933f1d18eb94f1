// ReplicaStore: where protected KV is kept for other nodes' requests, and how
// much. It picks a replica node for a request by the scenario's placement
// (the storage node, the next GPU node, or the node holding the least), keeps
// the bytes held per node and in all, and remembers the peak — with, beside
// it, what full replicas would have held at that moment (the storage RISK-KV
// and ProxyKV save). Which node may hold a replica (up, reachable) is the
// caller's to say; the store only books.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/spec.hpp"

namespace kvshift::sim {

class ReplicaStore {
 public:
  /// `kinds`: each node's kind, by index; `storage_node`: the store for kStorage (-1: none).
  ReplicaStore(std::vector<NodeKind> kinds, ReplicaPlacement placement, int storage_node);

  /// A replica node for a request running on `gpu_node`, among the nodes `usable` accepts
  /// (never `gpu_node` itself, never a switch); -1 when there is none.
  int pick(int gpu_node, const std::function<bool(int)>& usable) const;

  /// `bytes` of protected KV landed on `node` (`full_equiv`: what a full replica would hold).
  void add(int node, std::int64_t bytes, std::int64_t full_equiv);
  /// A replica of `bytes` on `node` is dropped.
  void remove(int node, std::int64_t bytes, std::int64_t full_equiv);

  std::int64_t held(int node) const { return held_[static_cast<std::size_t>(node)]; }
  std::int64_t total() const { return total_; }
  std::int64_t peak() const { return peak_; }
  /// What full replicas would have held at the peak.
  std::int64_t peak_full_equiv() const { return peak_full_equiv_; }

 private:
  std::vector<NodeKind> kinds_;
  ReplicaPlacement placement_;
  int storage_node_;
  std::vector<std::int64_t> held_;  ///< node -> KV bytes held for others
  std::int64_t total_ = 0, full_equiv_ = 0, peak_ = 0, peak_full_equiv_ = 0;
};

}  // namespace kvshift::sim
