// RequestRouter: where a request's KV may go. It books each GPU's HBM for KV
// (capacity, and the reservation of every request placed there), knows which
// GPUs take new work (up, on a node that is not draining), and picks a GPU by
// the scenario's policy: least loaded (an index ordered by reserved share, so
// the usual pick is O(1) and an update O(log n)), round robin, or random (seeded). A reservation
// over capacity, or a request reserved twice, is a bug in the caller: it
// throws std::logic_error, loudly, instead of letting HBM overflow silently.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sim/serving/load_index.hpp"
#include "sim/spec.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {

class RequestRouter {
 public:
  RequestRouter(Router policy, std::uint64_t seed);

  /// Adds a GPU of node `node` with `capacity` bytes for KV; returns its index (0, 1, ...).
  int add_gpu(int node, std::int64_t capacity);
  std::size_t size() const { return gpus_.size(); }
  int node(int gpu) const { return at(gpu).node; }
  std::int64_t capacity(int gpu) const { return at(gpu).capacity; }
  std::int64_t reserved(int gpu) const { return at(gpu).reserved; }
  /// Requests holding a reservation on `gpu`.
  const std::set<std::uint64_t>& members(int gpu) const { return at(gpu).members; }
  bool holds(int gpu, std::uint64_t request) const { return at(gpu).members.count(request) > 0; }

  /// Whether `gpu` takes new work (its GPU is up and its node is not draining).
  void set_open(int gpu, bool open);
  /// Books `bytes` of `gpu`'s HBM for `request`.
  void reserve(int gpu, std::uint64_t request, std::int64_t bytes);
  /// Gives them back.
  void release(int gpu, std::uint64_t request, std::int64_t bytes);
  /// The GPU lost its HBM (a failure): every reservation is gone; returns who held one.
  std::vector<std::uint64_t> clear(int gpu);

  /// The GPU the policy picks for `bytes`, not on `exclude_node`; -1 when none has room.
  int route(std::int64_t bytes, int exclude_node);
  /// Up to `k` GPUs with room, one per node: the policy's pick first, then (least loaded) in
  /// load order or (the other policies) by index.
  std::vector<int> destinations(std::int64_t bytes, int exclude_node, std::size_t k);

 private:
  struct Gpu {
    int node = 0;
    std::int64_t capacity = 0;
    std::int64_t reserved = 0;
    bool open = true;
    std::set<std::uint64_t> members;
  };
  const Gpu& at(int gpu) const { return gpus_[static_cast<std::size_t>(gpu)]; }
  Gpu& at(int gpu) { return gpus_[static_cast<std::size_t>(gpu)]; }
  bool fits(int gpu, std::int64_t bytes, int exclude_node) const;
  /// Moves `gpu` in the load index to its new reservation (out of it when closed).
  void reindex(int gpu, std::int64_t reserved);

  Router policy_;
  Rng rng_;
  std::vector<Gpu> gpus_;
  LoadIndex by_load_;  ///< open GPUs by (reserved share, index)
  std::size_t round_robin_ = 0;
};

}  // namespace kvshift::sim
