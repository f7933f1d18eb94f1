// PredictorCache: which nodes hold the RISK-KV predictors, and which are being
// sent them. A fetch to a node is shared: every move that needs the predictors
// there while one is on its way waits for it instead of shipping its own copy,
// so N concurrent recoveries onto one node ship the predictors once. A node
// whose HBM budget cannot hold them keeps nothing after a fetch lands (the
// moves waiting for that fetch still use it). State only: the serving model
// sends the bytes and tells the cache what happened.
#pragma once

#include <cstdint>
#include <vector>

namespace kvshift::sim {

class PredictorCache {
 public:
  enum class State { kAbsent, kFetching, kResident };

  /// `nodes` nodes, none holding anything; `cacheable`: a landed fetch stays resident.
  PredictorCache(std::size_t nodes, bool cacheable);

  State state(int node) const { return nodes_[static_cast<std::size_t>(node)].state; }
  /// Resident or on its way: a move planned now ships no predictor bytes of its own.
  bool at_or_coming(int node) const { return state(node) != State::kAbsent; }
  /// When a fetch on its way is expected to land (ns; meaningful while kFetching).
  std::int64_t eta_ns(int node) const { return nodes_[static_cast<std::size_t>(node)].eta_ns; }

  /// Loaded without a transfer (preloaded placement, a repaired node).
  void preload(int node);
  /// A fetch to `node` starts now (before its transfer is sent: a send may fail at once);
  /// `eta_ns` is its estimated landing time.
  void begin_fetch(int node, std::int64_t eta_ns);
  /// `move` waits for the fetch in flight to `node`.
  void wait(int node, std::uint64_t move);
  /// The fetch landed (or failed): returns the moves that waited; the node is resident
  /// (cacheable and delivered) or absent.
  std::vector<std::uint64_t> end_fetch(int node, bool delivered);
  /// The node lost its HBM (failure): nothing resident; a fetch in flight fails separately.
  void drop(int node);

  /// Nodes holding a copy now.
  std::int64_t copies() const;

 private:
  struct Node {
    State state = State::kAbsent;
    std::int64_t eta_ns = 0;
    std::vector<std::uint64_t> waiting;
  };
  std::vector<Node> nodes_;
  bool cacheable_;
};

}  // namespace kvshift::sim
