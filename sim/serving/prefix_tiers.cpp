#include "sim/serving/prefix_tiers.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvshift::sim {

namespace {

NodeId node_id(int node) { return static_cast<NodeId>(node); }

}  // namespace

std::vector<std::uint64_t> prefix_keys(const RequestArrival& a, std::int64_t block_tokens) {
  const auto whole = static_cast<std::size_t>((a.prompt_tokens - 1) / block_tokens);
  std::vector<std::uint64_t> keys;
  if (a.block_hashes) {
    keys.assign(a.block_hashes->begin(),
                a.block_hashes->begin() +
                    static_cast<std::ptrdiff_t>(std::min(whole, a.block_hashes->size())));
  } else if (a.prefix_group >= 0) {
    // A synthetic prefix's block b stands for group g's first b + 1 blocks.
    const auto n = std::min(whole, static_cast<std::size_t>(a.prefix_tokens / block_tokens));
    for (std::size_t b = 0; b < n; ++b) {
      keys.push_back(derive_seed(static_cast<std::uint64_t>(a.prefix_group), b));
    }
  }
  return keys;
}

PrefixTiers::PrefixTiers(const PrefixCacheSpec& spec, Parts parts, std::size_t nodes,
                         std::span<const Gpu> gpus, int storage_node,
                         std::int64_t storage_block_bytes)
    : spec_(spec),
      p_(parts),
      gpus_(gpus.begin(), gpus.end()),
      hbm_(gpus.size()),
      host_(nodes),
      ssd_(nodes),
      ssd_io_(nodes),
      storage_node_(storage_node) {
  if (!spec.enabled) return;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    hbm_[g] = std::make_unique<PrefixCache>(gpus[g].block_bytes);
    const auto node = static_cast<std::size_t>(gpus[g].node);
    if (spec.host_offload && !host_[node]) {  // the node's first GPU's model sets its blocks
      host_[node] = std::make_unique<PrefixCache>(gpus[g].block_bytes);
      if (spec.ssd_tier) ssd_[node] = std::make_unique<PrefixCache>(gpus[g].block_bytes);
    }
  }
  if (storage_node >= 0) storage_ = std::make_unique<PrefixCache>(storage_block_bytes);
}

bool PrefixTiers::storage_up() const {
  return storage_ && p_.node_up[static_cast<std::size_t>(storage_node_)];
}

// ------------------------------------------------------------ prefills

std::int64_t PrefixTiers::reuse(PrefixHold& h, std::int64_t prompt_tokens, int gpu, SimTime& load,
                                std::size_t& fetch) {
  unpin(h);  // pins of a cache lost with a failed GPU
  fetch = 0;
  if (!caches(gpu)) return 0;
  PrefixCacheStats& st = p_.stats;
  const std::int64_t block_tokens = spec_.block_tokens;
  ++st.prefills;
  st.prompt_tokens += prompt_tokens;
  if (h.keys.empty()) return 0;
  ++st.lookups;
  st.lookup_tokens += static_cast<std::int64_t>(h.keys.size()) * block_tokens;
  const PrefixRun found = run(h, prompt_tokens, gpu);
  const std::size_t hit = found.blocks();
  // Pinned in HBM from now, as the blocks it finds there: a request arriving while they load
  // finds them too (at most the load early).
  load = read(h, gpu, found, hit - found.from_storage, false);
  if (found.from_storage > 0) {
    fetch = found.from_storage;
    const std::size_t first = hit - fetch;
    storage_->touch(std::span<const std::uint64_t>(h.keys).subspan(first, fetch));
    PrefixCacheStats::Tier& t = st.storage;
    ++t.hits;
    t.hit_tokens += static_cast<std::int64_t>(fetch) * block_tokens;
    t.read_bytes += static_cast<std::int64_t>(fetch) * storage_->block_bytes();
  }
  if (hit == 0) return 0;
  pin(h, gpu, hit);
  const std::int64_t cached = static_cast<std::int64_t>(hit) * block_tokens;
  const ServingCosts& c = *gpus_[static_cast<std::size_t>(gpu)].costs;
  ++st.hits;
  st.hit_tokens += cached;
  st.saved_prefill_ns += c.prefill(prompt_tokens).ns - c.extend(cached, prompt_tokens - cached).ns;
  return cached;
}

SimTime PrefixTiers::read(const PrefixHold& h, int gpu, const PrefixRun& run, std::size_t blocks,
                          bool for_move) {
  const auto node = static_cast<std::size_t>(gpus_[static_cast<std::size_t>(gpu)].node);
  const std::span<const std::uint64_t> keys(h.keys);
  const std::int64_t block_tokens = spec_.block_tokens;
  const std::int64_t block_bytes = this->block_bytes(gpu);
  const std::size_t from_host = std::min(run.from_host, blocks - std::min(blocks, run.in_hbm));
  const std::size_t from_ssd =
      std::min(run.from_ssd, blocks - std::min(blocks, run.in_hbm + from_host));
  // One tier's books: a prefill's hit, or a move's load.
  auto count = [&](PrefixCacheStats::Tier& tier, std::size_t n) {
    const std::int64_t tokens = static_cast<std::int64_t>(n) * block_tokens;
    ++(for_move ? tier.move_loads : tier.hits);
    (for_move ? tier.move_tokens : tier.hit_tokens) += tokens;
    tier.read_bytes += static_cast<std::int64_t>(n) * block_bytes;
  };
  if (from_host > 0) {
    host_[node]->touch(keys.subspan(run.in_hbm, from_host));
    count(p_.stats.host, from_host);
  }
  if (from_ssd > 0) {
    ssd_[node]->touch(keys.subspan(run.in_hbm + from_host, from_ssd));
    count(p_.stats.ssd, from_ssd);
  }
  if (from_host + from_ssd == 0) return {};
  // The SSD's blocks are read into host DRAM first; then all of them cross the host link.
  const SimTime now = p_.sim.now();
  SimTime ready = now;
  if (from_ssd > 0) {
    ready = ssd_io_[node].copy(now, now,
                               ssd_time(static_cast<std::int64_t>(from_ssd) * block_bytes, false));
  }
  return p_.links.copy(gpu, true, static_cast<std::int64_t>(from_host + from_ssd) * block_bytes,
                       ready) -
         now;
}

std::size_t PrefixTiers::pin(PrefixHold& h, int gpu, std::size_t blocks) {
  if (h.gpu >= 0 && h.gpu != gpu) {
    throw std::logic_error("invariant: a request pins prefix blocks on GPUs " +
                           std::to_string(h.gpu) + " and " + std::to_string(gpu));
  }
  const std::span<const std::uint64_t> keys(h.keys);
  const std::size_t inserted = pin_blocks(gpu, keys.subspan(h.pinned, blocks - h.pinned));
  h.pinned = blocks;
  h.gpu = gpu;
  h.generation = hbm_[static_cast<std::size_t>(gpu)]->generation();
  p_.stats.inserted_blocks += static_cast<std::int64_t>(inserted);
  return inserted;
}

std::size_t PrefixTiers::pin_blocks(int gpu, std::span<const std::uint64_t> keys) {
  PrefixCache& cache = *hbm_[static_cast<std::size_t>(gpu)];
  const std::int64_t before = cache.pinned_bytes();
  const std::size_t inserted = cache.pin(keys);
  if (cache.pinned_bytes() != before) p_.router.set_cached(gpu, cache.pinned_bytes());
  return inserted;
}

void PrefixTiers::unpin_blocks(int gpu, std::span<const std::uint64_t> keys,
                               std::uint64_t generation) {
  PrefixCache& cache = *hbm_[static_cast<std::size_t>(gpu)];
  if (cache.generation() != generation) return;  // lost with a failed GPU
  const std::int64_t before = cache.pinned_bytes();
  cache.unpin(keys);
  if (cache.pinned_bytes() != before) p_.router.set_cached(gpu, cache.pinned_bytes());
}

void PrefixTiers::cache_prompt(PrefixHold& h, std::uint64_t id, int gpu, std::int64_t booked) {
  if (h.keys.empty()) return;
  // Shrink the request's booking before pinning: a block another prefill cached meanwhile
  // is pinned from the free room, and the request's own copy of it is dropped.
  p_.router.release(gpu, id);
  p_.router.reserve(gpu, id, booked - static_cast<std::int64_t>(h.keys.size()) * block_bytes(gpu));
  pin(h, gpu, h.keys.size());
  // Written through to the node's host tier.
  const int node = gpus_[static_cast<std::size_t>(gpu)].node;
  if (PrefixCache* host = host_[static_cast<std::size_t>(node)].get()) {
    const auto written = static_cast<std::int64_t>(host->touch(h.keys));
    p_.stats.host.written_blocks += written;
    p_.stats.host.written_bytes += written * host->block_bytes();
    host_bytes_ += written * host->block_bytes();
    // The copy runs beside decode and nothing waits for it, but it holds the host link.
    if (written > 0) p_.links.copy(gpu, false, written * host->block_bytes());
    fit_host_tier(node);
    p_.stats.host.peak_bytes = std::max(p_.stats.host.peak_bytes, host_bytes_);  // once it fits
  }
}

PrefixRun PrefixTiers::run(const PrefixHold& h, std::int64_t prompt_tokens, int gpu) const {
  const Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  PrefixRun run;
  const std::span<const std::uint64_t> keys(h.keys);
  const auto node = static_cast<std::size_t>(g.node);
  run.in_hbm = hbm_[static_cast<std::size_t>(gpu)]->match(keys);
  const PrefixCache* host = host_[node].get();
  if (!host) return run;
  run.from_host = host->match(keys.subspan(run.in_hbm));
  if (const PrefixCache* ssd = ssd_[node].get()) {
    run.from_ssd = ssd->match(keys.subspan(run.in_hbm + run.from_host));
  }
  const std::int64_t block = host->block_bytes();
  const std::int64_t ssd_bytes = static_cast<std::int64_t>(run.from_ssd) * block;
  const std::int64_t bytes = static_cast<std::int64_t>(run.from_host) * block + ssd_bytes;
  if (bytes > 0) {  // read()'s copies, as they would go now
    const SimTime now = p_.sim.now();
    const SimTime ssd =
        ssd_bytes > 0 ? ssd_io_[node].backlog(now) + ssd_time(ssd_bytes, false) : SimTime{};
    run.load = std::max(ssd, p_.links.backlog_to_gpu(gpu)) + p_.links.time(bytes);
  }
  if (!storage_up()) return run;
  const std::size_t local = run.local();
  run.from_storage = storage_->match(keys.subspan(local));
  if (run.from_storage == 0) return run;
  const std::optional<cost_model::Path> path =
      p_.fabric.path(node_id(storage_node_), node_id(g.node));
  const BitsPerSecond share =
      p_.fabric.available_bandwidth(node_id(storage_node_), node_id(g.node));
  if (!path || share.value <= 0) {
    run.from_storage = 0;
    return run;
  }
  const Bytes fetched{static_cast<std::int64_t>(run.from_storage) * block};
  const SimTime remote =
      SimTime{round_to_ns(path->latency.value) + round_to_ns(fetched.bits() / share.value)} +
      p_.links.time(fetched.count);
  // Fetched only when that beats prefilling those blocks (a busy path to the store does not).
  const ServingCosts& c = *g.costs;
  const std::int64_t block_tokens = spec_.block_tokens;
  const std::int64_t prompt = prompt_tokens;
  const std::int64_t have = static_cast<std::int64_t>(local) * block_tokens;
  const std::int64_t more = static_cast<std::int64_t>(run.from_storage) * block_tokens;
  const SimTime without = have > 0 ? c.extend(have, prompt - have) : c.prefill(prompt);
  if (remote >= without - c.extend(have + more, prompt - have - more)) {
    run.from_storage = 0;
    return run;
  }
  run.load = std::max(run.load, remote);
  return run;
}

std::int64_t PrefixTiers::pinned_bytes(const PrefixHold& h) const {
  return h.pinned == 0 ? 0 : static_cast<std::int64_t>(h.pinned) * block_bytes(h.gpu);
}

void PrefixTiers::unpin(PrefixHold& h) {
  if (h.gpu < 0) return;
  unpin_blocks(h.gpu, std::span<const std::uint64_t>(h.keys).first(h.pinned), h.generation);
  h.pinned = 0;
  h.gpu = -1;
}

// ------------------------------------------------------------ moves

PrefixRun PrefixTiers::cached_at(const PrefixHold& h, std::int64_t prompt_tokens, int gpu) const {
  const PrefixCache* cache = hbm_[static_cast<std::size_t>(gpu)].get();
  // The move pins what it reuses and hands the pins over when it lands (after the source's
  // are given back); a request never pins one cache twice.
  const bool pinned_here = h.gpu == gpu && cache && cache->generation() == h.generation;
  if (!cache || h.keys.empty() || pinned_here) return {};
  return run(h, prompt_tokens, gpu);
}

PrefixTiers::MoveLoad PrefixTiers::load_for_move(const PrefixHold& h, std::int64_t prompt_tokens,
                                                 int gpu, std::size_t blocks) {
  // From the destination node's host and SSD tiers over its host link, then (the run's last
  // blocks) from the storage tier over the network.
  MoveLoad m;
  const PrefixRun found = run(h, prompt_tokens, gpu);
  const std::size_t local = std::min(blocks, found.local());
  m.load = read(h, gpu, found, local, true);
  m.fetch_blocks = blocks - local;
  if (const std::size_t fetch = m.fetch_blocks; fetch > 0) {
    storage_->touch(std::span<const std::uint64_t>(h.keys).subspan(local, fetch));
    PrefixCacheStats::Tier& t = p_.stats.storage;
    ++t.move_loads;
    t.move_tokens += static_cast<std::int64_t>(fetch) * spec_.block_tokens;
    t.read_bytes += static_cast<std::int64_t>(fetch) * storage_->block_bytes();
  }
  pin_blocks(gpu, std::span<const std::uint64_t>(h.keys).first(blocks));
  m.pins = {blocks, hbm_[static_cast<std::size_t>(gpu)]->generation()};
  return m;
}

void PrefixTiers::give_back(const PrefixHold& h, int gpu, PrefixPins pins) {
  if (pins.blocks == 0) return;
  unpin_blocks(gpu, std::span<const std::uint64_t>(h.keys).first(pins.blocks), pins.generation);
}

void PrefixTiers::take_pins(PrefixHold& h, int gpu, PrefixPins pins) {
  if (pins.blocks == 0) return;
  unpin(h);  // pins of a cache lost with a failed GPU
  if (hbm_[static_cast<std::size_t>(gpu)]->generation() != pins.generation) return;
  h.pinned = pins.blocks;
  h.gpu = gpu;
  h.generation = pins.generation;
}

// ------------------------------------------------------------ room

void PrefixTiers::fit_cache(int gpu) {
  PrefixCache* cache = hbm_[static_cast<std::size_t>(gpu)].get();
  if (!cache) return;
  const RequestRouter& router = p_.router;
  const std::int64_t over = router.reserved(gpu) + cache->unpinned_bytes() - router.capacity(gpu);
  if (over <= 0) return;
  p_.stats.evicted_blocks += static_cast<std::int64_t>(cache->evict(over));
  if (router.reserved(gpu) + cache->unpinned_bytes() > router.capacity(gpu)) {
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " holds more KV and cached blocks than its HBM");
  }
}

void PrefixTiers::fit_host_tier(int node) {
  if (node == storage_node_) fit_storage_tier();  // its replicas may have taken room
  PrefixCache* host = host_[static_cast<std::size_t>(node)].get();
  if (!host) return;
  // Replicas come first: the tier keeps what is left of host DRAM.
  const std::int64_t room = p_.replicas.room(node);
  const std::int64_t over = host->unpinned_bytes() - room;
  if (over <= 0) return;
  std::vector<std::uint64_t> keys;
  const bool below = ssd_[static_cast<std::size_t>(node)] || storage_;
  const auto evicted = static_cast<std::int64_t>(host->evict(over, below ? &keys : nullptr));
  p_.stats.host.evicted_blocks += evicted;
  host_bytes_ -= evicted * host->block_bytes();
  if (host->unpinned_bytes() > room) {
    throw std::logic_error("invariant: node " + std::to_string(node) +
                           " holds more replicas and host-tier blocks than its host DRAM");
  }
  if (keys.empty()) return;
  if (ssd_[static_cast<std::size_t>(node)]) {
    spill_to_ssd(node, keys);
  } else {
    spill_to_storage(node, keys);
  }
}

SimTime PrefixTiers::ssd_time(std::int64_t bytes, bool write) const {
  if (bytes <= 0) return {};
  const PrefixCacheSpec::SsdTier& ssd = *spec_.ssd_tier;
  const BitsPerSecond rate = write ? ssd.write_bandwidth : ssd.read_bandwidth;
  return SimTime{round_to_ns(Bytes{bytes}.bits() / rate.value)};
}

void PrefixTiers::spill_to_ssd(int node, std::span<const std::uint64_t> keys) {
  PrefixCache& ssd = *ssd_[static_cast<std::size_t>(node)];
  PrefixCacheStats::Tier& st = p_.stats.ssd;
  const auto written = static_cast<std::int64_t>(ssd.touch(keys));
  st.written_blocks += written;
  st.written_bytes += written * ssd.block_bytes();
  ssd_bytes_ += written * ssd.block_bytes();
  // The write takes its turn on the SSD: reads asked for after it wait for it.
  const SimTime now = p_.sim.now();
  ssd_io_[static_cast<std::size_t>(node)].copy(now, now,
                                               ssd_time(written * ssd.block_bytes(), true));
  const std::int64_t capacity = spec_.ssd_tier->capacity.count;
  const std::int64_t over = ssd.unpinned_bytes() - capacity;
  std::vector<std::uint64_t> evicted_keys;
  if (over > 0) {
    const auto evicted =
        static_cast<std::int64_t>(ssd.evict(over, storage_ ? &evicted_keys : nullptr));
    st.evicted_blocks += evicted;
    ssd_bytes_ -= evicted * ssd.block_bytes();
  }
  st.peak_bytes = std::max(st.peak_bytes, ssd_bytes_);
  if (ssd.unpinned_bytes() > capacity) {
    throw std::logic_error("invariant: node " + std::to_string(node) +
                           " holds more SSD-tier blocks than the tier's capacity");
  }
  if (!evicted_keys.empty()) spill_to_storage(node, evicted_keys);
}

void PrefixTiers::spill_to_storage(int node, std::span<const std::uint64_t> keys) {
  // Without the node or a path to it, the blocks are dropped.
  if (!storage_up() || !p_.fabric.reachable(node_id(node), node_id(storage_node_))) return;
  PrefixCacheStats::Tier& st = p_.stats.storage;
  const std::int64_t block = storage_->block_bytes();
  const auto written = static_cast<std::int64_t>(storage_->touch(keys));
  st.written_blocks += written;
  st.written_bytes += written * block;
  storage_bytes_ += written * block;
  // Over the network, beside everything else on the path; nothing waits for it.
  if (written > 0) {
    p_.fabric.send(node_id(node), node_id(storage_node_), Bytes{written * block},
                   [](bool, const std::string&) {});
  }
  fit_storage_tier();
  st.peak_bytes = std::max(st.peak_bytes, storage_bytes_);  // once it fits
}

void PrefixTiers::fit_storage_tier() {
  if (!storage_) return;
  // Replicas there come first: the tier keeps what is left of the node's capacity.
  const std::int64_t room = p_.replicas.room(storage_node_);
  const std::int64_t over = storage_->unpinned_bytes() - room;
  if (over <= 0) return;
  const auto evicted = static_cast<std::int64_t>(storage_->evict(over));
  p_.stats.storage.evicted_blocks += evicted;
  storage_bytes_ -= evicted * storage_->block_bytes();
  if (storage_->unpinned_bytes() > room) {
    throw std::logic_error("invariant: storage node " + std::to_string(storage_node_) +
                           " holds more replicas and prefix blocks than its capacity");
  }
}

// ------------------------------------------------------------ failures

void PrefixTiers::gpu_failed(int gpu) {
  if (PrefixCache* cache = hbm_[static_cast<std::size_t>(gpu)].get()) {
    p_.stats.lost_blocks += static_cast<std::int64_t>(cache->blocks());
    cache->clear();
  }
}

void PrefixTiers::node_failed(int node) {
  if (node == storage_node_ && storage_) {  // the storage tier is gone with its node
    p_.stats.storage.lost_blocks += static_cast<std::int64_t>(storage_->blocks());
    storage_bytes_ = 0;
    storage_->clear();
  }
  if (PrefixCache* host = host_[static_cast<std::size_t>(node)].get()) {
    p_.stats.host.lost_blocks += static_cast<std::int64_t>(host->blocks());
    host_bytes_ -= static_cast<std::int64_t>(host->blocks()) * host->block_bytes();
    host->clear();
  }
}

void PrefixTiers::close(HostLinkStats& links) {
  for (const auto& cache : hbm_) {
    if (cache) {
      p_.stats.resident_bytes += static_cast<std::int64_t>(cache->blocks()) * cache->block_bytes();
    }
  }
  for (const CopyQueue& q : ssd_io_) links.ssd_waited_ns += q.waited_ns();
  p_.stats.host.resident_bytes = host_bytes_;
  p_.stats.ssd.resident_bytes = ssd_bytes_;
  p_.stats.storage.resident_bytes = storage_bytes_;
}

}  // namespace kvshift::sim
