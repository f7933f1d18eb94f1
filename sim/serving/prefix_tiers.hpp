// PrefixTiers: where reusable prompt blocks live — each GPU's HBM cache, each
// node's host-DRAM and SSD tiers, and the cluster's storage tier — and what
// taking them costs. A prefill reuses the longest cached run of its prompt's
// leading blocks: in HBM, then continued from the node's host tier and SSD
// tier (loaded over the host link), then from the storage tier over the
// network, when fetching beats prefilling. Its blocks join the GPU's cache
// when the prefill ends and are written through to the host tier; evicted
// blocks spill down a tier. A move to a GPU that holds the request's leading
// blocks pins them and loads them while the rest travels.
//
// Blocks in use are pinned in one GPU's cache and booked there once (the
// router books the cache's pinned bytes); replicas come before the lower
// tiers in host DRAM and on the storage node.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/serving/copy_queue.hpp"
#include "sim/serving/fabric.hpp"
#include "sim/serving/host_links.hpp"
#include "sim/serving/prefix_cache.hpp"
#include "sim/serving/replica_store.hpp"
#include "sim/serving/request_router.hpp"
#include "sim/serving/results.hpp"
#include "sim/serving/serving_costs.hpp"
#include "sim/simulator.hpp"
#include "sim/spec.hpp"
#include "sim/workload.hpp"

namespace kvshift::sim {

/// A request's hold on prefix blocks: the keys of its prompt's cacheable leading blocks,
/// and the first `pinned` of them it pins in `gpu`'s cache (of that cache's generation).
struct PrefixHold {
  std::vector<std::uint64_t> keys;
  std::size_t pinned = 0;
  int gpu = -1;
  std::uint64_t generation = 0;
};

/// The keys of an arrival's cacheable leading blocks: whole blocks, and never the whole
/// prompt (its last token is always prefilled, for the first output token).
std::vector<std::uint64_t> prefix_keys(const RequestArrival& a, std::int64_t block_tokens);

/// The cached run of a request's leading blocks for one GPU: in its HBM, then continued in
/// its node's host tier, its SSD tier, then the storage tier, and how long the blocks off
/// the GPU take to reach HBM.
struct PrefixRun {
  std::size_t in_hbm = 0, from_host = 0, from_ssd = 0, from_storage = 0;
  SimTime load;
  std::size_t local() const { return in_hbm + from_host + from_ssd; }  ///< on the node
  std::size_t blocks() const { return local() + from_storage; }
};

class PrefixTiers {
 public:
  /// What the tiers work with, owned by the serving model.
  struct Parts {
    const Simulator& sim;
    Fabric& fabric;
    RequestRouter& router;  ///< books each GPU cache's pinned bytes
    HostLinks& links;
    const ReplicaStore& replicas;      ///< come first in host DRAM and on the storage node
    const std::vector<bool>& node_up;  ///< by node
    PrefixCacheStats& stats;
  };
  /// One GPU: its node, its model's block size and its costs (prefill against fetch).
  struct Gpu {
    int node = 0;
    std::int64_t block_bytes = 0;
    const ServingCosts* costs = nullptr;
  };
  /// Without `spec.enabled` nothing is cached. `storage_node` is -1 without a storage tier.
  PrefixTiers(const PrefixCacheSpec& spec, Parts parts, std::size_t nodes,
              std::span<const Gpu> gpus, int storage_node, std::int64_t storage_block_bytes);

  /// Whether `gpu` caches prefix blocks (prefix caching is on).
  bool caches(int gpu) const { return hbm_[static_cast<std::size_t>(gpu)] != nullptr; }
  std::int64_t block_bytes(int gpu) const {
    return hbm_[static_cast<std::size_t>(gpu)]->block_bytes();
  }
  int storage_node() const { return storage_node_; }
  std::int64_t storage_block_bytes() const { return storage_->block_bytes(); }

  // Prefills.
  /// At the start of a prefill of `prompt_tokens` on `gpu`: pins the cached run of the
  /// prompt's leading blocks and returns its tokens (0 without a cache or a hit), counting
  /// the lookup; `load` is how long the blocks from the node's lower tiers take to reach
  /// HBM, and `fetch` how many blocks (the run's last) must come from the storage tier first.
  std::int64_t reuse(PrefixHold& h, std::int64_t prompt_tokens, int gpu, SimTime& load,
                     std::size_t& fetch);
  /// The prefill of request `id` on `gpu` ended: its prompt's blocks join the cache, booked
  /// there once instead of by the request (which booked `booked` bytes with its pins), and
  /// are written through to the node's host tier.
  void cache_prompt(PrefixHold& h, std::uint64_t id, int gpu, std::int64_t booked);
  /// The cached run for a prefill of `prompt_tokens` on `gpu` now; the storage tier's part
  /// only when fetching it (estimated over the network path's share now) beats prefilling.
  PrefixRun run(const PrefixHold& h, std::int64_t prompt_tokens, int gpu) const;
  /// Pins keys [h.pinned, blocks) in `gpu`'s cache; returns those inserted.
  std::size_t pin(PrefixHold& h, int gpu, std::size_t blocks);
  /// Bytes of the blocks `h` pins.
  std::int64_t pinned_bytes(const PrefixHold& h) const;
  /// Gives back `h`'s pins (none after its cache was lost to a failure).
  void unpin(PrefixHold& h);

  // Moves.
  /// The run a move to `gpu` need not ship or rebuild (none where `h` pins it already: a
  /// request never pins one cache twice).
  PrefixRun cached_at(const PrefixHold& h, std::int64_t prompt_tokens, int gpu) const;
  /// A move takes the first `blocks` cached for `h` at `gpu`: pinned there, loaded from the
  /// node's lower tiers over its host link (`load`), the last `fetch_blocks` from the
  /// storage tier over the network.
  struct MoveLoad {
    SimTime load;
    std::size_t fetch_blocks = 0;
    PrefixPins pins;
  };
  MoveLoad load_for_move(const PrefixHold& h, std::int64_t prompt_tokens, int gpu,
                         std::size_t blocks);
  /// A move that did not land gives back the pins it took at `gpu`.
  void give_back(const PrefixHold& h, int gpu, PrefixPins pins);
  /// A move landed: the pins it took at `gpu` are the request's own from now.
  void take_pins(PrefixHold& h, int gpu, PrefixPins pins);

  // Room.
  /// Evicts unpinned blocks until `gpu`'s bookings and its unpinned blocks fit in HBM.
  void fit_cache(int gpu);
  /// Evicts host-tier blocks of `node` until they fit beside its replicas in host DRAM;
  /// they go down to the SSD tier, else the storage tier.
  void fit_host_tier(int node);

  // Failures and the end of the run.
  void gpu_failed(int gpu);    ///< its cache is lost
  void node_failed(int node);  ///< its host tier, and the storage tier if it holds it
  /// Resident bytes into the stats; the SSDs' waits into `links`.
  void close(HostLinkStats& links);

 private:
  std::size_t pin_blocks(int gpu, std::span<const std::uint64_t> keys);
  void unpin_blocks(int gpu, std::span<const std::uint64_t> keys, std::uint64_t generation);
  /// The first `blocks` of `run` are taken for `h` on `gpu`: those past its HBM are read from
  /// the node's host and SSD tiers (touched, and counted as a prefill's hit or a move's load),
  /// the SSD's into host DRAM, then all over the GPU's host link. Returns how long from now
  /// until they are in HBM.
  SimTime read(const PrefixHold& h, int gpu, const PrefixRun& run, std::size_t blocks,
               bool for_move);
  /// Writes blocks the host tier of `node` evicted to its SSD tier, evicting the SSD's least
  /// recently used blocks beyond its capacity (down to the storage tier).
  void spill_to_ssd(int node, std::span<const std::uint64_t> keys);
  /// Sends blocks the lowest tier of `node` evicted to the storage tier (over the network;
  /// nothing waits for it), evicting its least recently used blocks beyond its room.
  void spill_to_storage(int node, std::span<const std::uint64_t> keys);
  void fit_storage_tier();
  /// Reading `bytes` from a node's SSD tier into its host DRAM, or writing them to it.
  SimTime ssd_time(std::int64_t bytes, bool write) const;
  bool storage_up() const;

  const PrefixCacheSpec& spec_;
  Parts p_;
  std::vector<Gpu> gpus_;
  std::vector<std::unique_ptr<PrefixCache>> hbm_;   ///< by GPU (null when caching is off)
  std::vector<std::unique_ptr<PrefixCache>> host_;  ///< by node (null without host_offload)
  std::vector<std::unique_ptr<PrefixCache>> ssd_;   ///< by node (null without ssd_tier)
  std::vector<CopyQueue> ssd_io_;                   ///< by node: reads and writes take turns
  std::unique_ptr<PrefixCache> storage_;            ///< null without storage_tier
  int storage_node_ = -1;
  std::int64_t host_bytes_ = 0, ssd_bytes_ = 0, storage_bytes_ = 0;  ///< held by each kind
};

}  // namespace kvshift::sim
