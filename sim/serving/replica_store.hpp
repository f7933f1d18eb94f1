// ReplicaStore: where protected KV is kept, and how much. It picks a replica
// node for a request by the scenario's placement (the storage node, the next
// GPU node, the node holding the least, or the request's own node), keeps the
// bytes held per node and in all, and remembers the peak — with, beside it,
// what full replicas would have held at that moment (the storage RISK-KV and
// ProxyKV save). Replicas live in a node's host DRAM (a storage node: its
// capacity): a pick books the request's final protected size there, as
// admission books HBM, so no node ever holds more than it has; a node without
// room is not picked. Which node may hold a replica (up, reachable) is the
// caller's to say; the store only books. Host DRAM also holds KV swapped out by
// preemption: it books the same room (book_swap), so neither overfills it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/spec.hpp"

namespace kvshift::sim {

class ReplicaStore {
 public:
  /// `kinds` and `capacity` (host DRAM, or a storage node's capacity): each node's, by index;
  /// `storage_node`: the store for kStorage (-1: none).
  ReplicaStore(std::vector<NodeKind> kinds, std::vector<std::int64_t> capacity,
               ReplicaPlacement placement, int storage_node);

  /// A replica node with room for `bytes` for a request running on `gpu_node`, among the
  /// nodes `usable` accepts (`gpu_node` itself only under kLocal, never a switch); -1 when
  /// there is none.
  int pick(int gpu_node, std::int64_t bytes, const std::function<bool(int)>& usable) const;
  /// Books `bytes` of `node`'s room for one replica (a pick's), and gives them back.
  void book(int node, std::int64_t bytes);
  void unbook(int node, std::int64_t bytes);
  std::int64_t booked(int node) const { return booked_[static_cast<std::size_t>(node)]; }
  /// Books `bytes` of `node`'s room for swapped-out KV, and gives them back.
  void book_swap(int node, std::int64_t bytes);
  void unbook_swap(int node, std::int64_t bytes);
  std::int64_t swapped(int node) const { return swapped_[static_cast<std::size_t>(node)]; }
  std::int64_t capacity(int node) const { return capacity_[static_cast<std::size_t>(node)]; }
  /// Room not booked on `node` (a prefix tier there keeps its blocks in it).
  std::int64_t room(int node) const { return capacity(node) - booked(node); }
  /// The highest share of one node's room its replicas have booked.
  double peak_share() const { return peak_share_; }

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
  std::vector<std::int64_t> capacity_;
  std::vector<std::int64_t> booked_;   ///< node -> room booked (replicas and swapped KV)
  std::vector<std::int64_t> swapped_;  ///< node -> of which swapped-out KV
  ReplicaPlacement placement_;
  int storage_node_;
  std::vector<std::int64_t> held_;  ///< node -> KV bytes streamed into its replicas
  double peak_share_ = 0;
  std::int64_t total_ = 0, full_equiv_ = 0, peak_ = 0, peak_full_equiv_ = 0;
};

}  // namespace kvshift::sim
