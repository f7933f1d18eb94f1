// RequestRouter: where a request's KV may go. It books each GPU's HBM for KV
// (capacity, and the reservation of every request placed there), knows which
// GPUs take new work (up, on a node that is not draining), and picks a GPU by
// its pool's policy: least loaded (an index ordered by reserved share, so the
// usual pick is O(1) and an update O(log n)), KV-aware (fewest KV bytes booked:
// admission books a request's final KV, so these are the blocks it will use),
// round robin, or random (seeded); prefix-aware pools are ordered as least loaded
// and their arrivals placed by the serving model, which knows the caches. Every GPU belongs to one
// pool (pool 0 unless the scenario declares pools); a pick may be limited to a set of pools. A
// reservation over capacity, or a request reserved twice, is a bug in the caller: it throws
// std::logic_error, loudly, instead of letting HBM overflow silently. Prefix-cache blocks in use
// are booked too (set_cached), once per GPU.
#pragma once

#include <boost/container/flat_map.hpp>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "sim/serving/load_index.hpp"
#include "sim/spec.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {

/// A set of pools, one bit per pool index (at most 64 pools).
using PoolSet = std::uint64_t;
inline constexpr PoolSet kAllPools = ~PoolSet{0};

class RequestRouter {
 public:
  /// A GPU's requests and the bytes each holds, by request id: a sorted array that keeps its
  /// capacity (a node-based map allocated a node per request and missed the cache for it).
  using Members = boost::container::flat_map<std::uint64_t, std::int64_t>;

  /// Pool 0 routes by `policy`.
  RequestRouter(Router policy, std::uint64_t seed);

  /// Adds a pool routed by `policy`; returns its index (1, 2, ...).
  int add_pool(Router policy);
  /// Adds a GPU of node `node` with `capacity` bytes for KV; returns its index (0, 1, ...).
  int add_gpu(int node, std::int64_t capacity, int pool = 0);
  std::size_t size() const { return gpus_.size(); }
  int node(int gpu) const { return at(gpu).node; }
  int pool(int gpu) const { return at(gpu).pool; }
  std::int64_t capacity(int gpu) const { return at(gpu).capacity; }
  /// Bytes booked on `gpu`: its requests' reservations and its pinned prefix-cache blocks.
  std::int64_t reserved(int gpu) const { return at(gpu).reserved; }
  /// Requests holding a reservation on `gpu`, with their bytes.
  const Members& members(int gpu) const { return at(gpu).members; }
  bool holds(int gpu, std::uint64_t request) const { return at(gpu).members.count(request) > 0; }
  /// The bytes `request` holds on `gpu` (0 when none).
  std::int64_t held(int gpu, std::uint64_t request) const;

  /// Bytes of `gpu`'s KV room not booked (unpinned prefix blocks live there).
  std::int64_t room(int gpu) const { return at(gpu).capacity - at(gpu).reserved; }

  /// Whether `gpu` takes new work (its GPU is up and its node is not draining).
  void set_open(int gpu, bool open);
  /// Picks (route, fitting, destinations) leave this share of each GPU's room free, for the
  /// growth of the requests already there (preemption's watermark; 0 by default).
  void set_watermark(double share);
  /// Books `bytes` of `gpu`'s HBM for `request`.
  void reserve(int gpu, std::uint64_t request, std::int64_t bytes);
  /// Books `bytes` more for `request`, which holds a reservation on `gpu` (its KV grew).
  void grow(int gpu, std::uint64_t request, std::int64_t bytes);
  /// Gives them back (all `request` holds there).
  void release(int gpu, std::uint64_t request);
  /// `gpu`'s prefix-cache blocks in use now: booked like a reservation, once however many
  /// requests share them (unpinned blocks live in the free room and are not booked).
  void set_cached(int gpu, std::int64_t bytes);
  /// The GPU lost its HBM (a failure): every reservation is gone; returns who held one.
  std::vector<std::uint64_t> clear(int gpu);

  /// Whether a destination node may take a move now (e.g. under its in-flight cap).
  using Accept = std::function<bool(int node)>;

  /// The GPU the policy picks for `bytes`, not on `exclude_node`, in `pools`; -1 when none has
  /// room. Over several pools: each pool's pick, the one with the lowest reserved share.
  int route(std::int64_t bytes, int exclude_node, PoolSet pools = kAllPools);
  /// Whether any of `pools` places its arrivals by cached prefix (Router::kPrefixAware).
  bool prefix_aware(PoolSet pools) const;
  /// Every GPU of `pools` that takes new work and has room for `bytes`, by pool and index.
  std::vector<int> fitting(std::int64_t bytes, PoolSet pools) const;
  /// Up to `k` GPUs with room, one per node, whose node `accept`s: the policy's pick first,
  /// then (least loaded, KV-aware) in load order or (the other policies) by index; over
  /// several pools, pool by pool, the pool of the lowest-share pick first.
  std::vector<int> destinations(std::int64_t bytes, int exclude_node, std::size_t k,
                                PoolSet pools = kAllPools, const Accept& accept = {});

 private:
  struct Gpu {
    int node = 0;
    int pool = 0;
    std::int64_t capacity = 0;
    std::int64_t reserved = 0;  ///< members' bytes plus `cached`
    std::int64_t cached = 0;
    std::int64_t watermark = 0;  ///< room picks leave free
    bool open = true;
    Members members;
  };
  struct Pool {
    Router policy = Router::kLeastLoaded;
    std::vector<int> gpus;
    LoadIndex by_load;  ///< open GPUs by (share, or bytes for KV-aware; index)
    std::size_t round_robin = 0;
  };
  const Gpu& at(int gpu) const { return gpus_[static_cast<std::size_t>(gpu)]; }
  Gpu& at(int gpu) { return gpus_[static_cast<std::size_t>(gpu)]; }
  bool fits(int gpu, std::int64_t bytes, int exclude_node) const;
  /// Moves `gpu` in its pool's load index to its new reservation (out of it when closed).
  void reindex(int gpu, std::int64_t reserved);
  int route_in(Pool& p, std::int64_t bytes, int exclude_node, const Accept& accept);
  void destinations_in(Pool& p, std::int64_t bytes, int exclude_node, std::size_t k,
                       const Accept& accept, std::vector<int>& out);
  double share(int gpu) const;

  Rng rng_;
  std::vector<Gpu> gpus_;
  std::vector<Pool> pools_;
};

}  // namespace kvshift::sim
