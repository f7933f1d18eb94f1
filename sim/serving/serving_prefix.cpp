// ServingModel: prefix caching — the keys of a request's cacheable blocks, pins
// in a GPU's PrefixCache, the HBM the cache may use, and the node's host and SSD
// tiers.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

std::vector<std::uint64_t> ServingModel::prefix_keys(const RequestArrival& a) const {
  const std::int64_t block = spec_.serving.prefix_cache.block_tokens;
  const auto whole = static_cast<std::size_t>((a.prompt_tokens - 1) / block);
  std::vector<std::uint64_t> keys;
  if (a.block_hashes) {
    keys.assign(a.block_hashes->begin(),
                a.block_hashes->begin() +
                    static_cast<std::ptrdiff_t>(std::min(whole, a.block_hashes->size())));
  } else if (a.prefix_group >= 0) {
    // A synthetic prefix's block b stands for group g's first b + 1 blocks.
    const auto n = std::min(whole, static_cast<std::size_t>(a.prefix_tokens / block));
    for (std::size_t b = 0; b < n; ++b) {
      keys.push_back(derive_seed(static_cast<std::uint64_t>(a.prefix_group), b));
    }
  }
  return keys;
}

std::int64_t ServingModel::reuse_prefix(Request& r, int gpu, SimTime& load, std::size_t& fetch) {
  unpin_prefix(r);  // pins of a cache lost with a failed GPU
  fetch = 0;
  const Gpu& g = gpus_[gpu];
  if (!g.cache) return 0;
  PrefixCacheStats& st = result_.prefix_cache;
  const std::int64_t block_tokens = spec_.serving.prefix_cache.block_tokens;
  ++st.prefills;
  st.prompt_tokens += r.rec.prompt_tokens;
  if (r.prefix_keys.empty()) return 0;
  ++st.lookups;
  st.lookup_tokens += static_cast<std::int64_t>(r.prefix_keys.size()) * block_tokens;
  const PrefixRun run = prefix_run(r, gpu);
  const std::size_t hit = run.blocks();
  // Pinned in HBM from now, as the blocks it finds there: a request arriving while they load
  // finds them too (at most the load early).
  load = read_tiers(r, gpu, run, hit - run.from_storage, false);
  if (run.from_storage > 0) {
    fetch = run.from_storage;
    const std::size_t first = hit - fetch;
    storage_tier_->touch(std::span<const std::uint64_t>(r.prefix_keys).subspan(first, fetch));
    PrefixCacheStats::Tier& t = st.storage;
    ++t.hits;
    t.hit_tokens += static_cast<std::int64_t>(fetch) * block_tokens;
    t.read_bytes += static_cast<std::int64_t>(fetch) * storage_tier_->block_bytes();
  }
  if (hit == 0) return 0;
  pin_prefix(r, gpu, hit);
  const std::int64_t cached = static_cast<std::int64_t>(hit) * block_tokens;
  const std::int64_t prompt = r.rec.prompt_tokens;
  const ServingCosts& c = costs_of(g.node);
  ++st.hits;
  st.hit_tokens += cached;
  st.saved_prefill_ns += c.prefill(prompt).ns - c.extend(cached, prompt - cached).ns;
  return cached;
}

SimTime ServingModel::read_tiers(const Request& r, int gpu, const PrefixRun& run,
                                 std::size_t blocks, bool for_move) {
  const auto node = static_cast<std::size_t>(gpus_[gpu].node);
  const std::span<const std::uint64_t> keys(r.prefix_keys);
  const std::int64_t block_tokens = spec_.serving.prefix_cache.block_tokens;
  const std::int64_t block_bytes = gpus_[gpu].cache->block_bytes();
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
    host_tiers_[node]->touch(keys.subspan(run.in_hbm, from_host));
    count(result_.prefix_cache.host, from_host);
  }
  if (from_ssd > 0) {
    ssd_tiers_[node]->touch(keys.subspan(run.in_hbm + from_host, from_ssd));
    count(result_.prefix_cache.ssd, from_ssd);
  }
  if (from_host + from_ssd == 0) return {};
  // The SSD's blocks are read into host DRAM first; then all of them cross the host link.
  const SimTime now = sim_.now();
  SimTime ready = now;
  if (from_ssd > 0) {
    ready = ssd_io_[node].copy(now, now,
                               ssd_time(static_cast<std::int64_t>(from_ssd) * block_bytes, false));
  }
  return host_copy(gpu, true, static_cast<std::int64_t>(from_host + from_ssd) * block_bytes,
                   ready) -
         now;
}

std::size_t ServingModel::pin_prefix(Request& r, int gpu, std::size_t blocks) {
  PrefixCache& cache = *gpus_[gpu].cache;
  if (r.pin_gpu >= 0 && r.pin_gpu != gpu) {
    throw std::logic_error("invariant: request " + std::to_string(r.rec.id) +
                           " pins prefix blocks on two GPUs");
  }
  const std::span<const std::uint64_t> keys(r.prefix_keys);
  const std::size_t inserted = pin_blocks(gpu, keys.subspan(r.pinned, blocks - r.pinned));
  r.pinned = blocks;
  r.pin_gpu = gpu;
  r.pin_generation = cache.generation();
  result_.prefix_cache.inserted_blocks += static_cast<std::int64_t>(inserted);
  return inserted;
}

std::size_t ServingModel::pin_blocks(int gpu, std::span<const std::uint64_t> keys) {
  PrefixCache& cache = *gpus_[gpu].cache;
  const std::int64_t before = cache.pinned_bytes();
  const std::size_t inserted = cache.pin(keys);
  if (cache.pinned_bytes() != before) router_.set_cached(gpu, cache.pinned_bytes());
  return inserted;
}

void ServingModel::unpin_blocks(int gpu, std::span<const std::uint64_t> keys,
                                std::uint64_t generation) {
  PrefixCache& cache = *gpus_[gpu].cache;
  if (cache.generation() != generation) return;  // lost with a failed GPU
  const std::int64_t before = cache.pinned_bytes();
  cache.unpin(keys);
  if (cache.pinned_bytes() != before) router_.set_cached(gpu, cache.pinned_bytes());
}

void ServingModel::cache_prompt(Request& r, int gpu, std::int64_t booked) {
  if (r.prefix_keys.empty()) return;
  // Shrink the request's booking before pinning: a block another prefill cached meanwhile
  // is pinned from the free room, and the request's own copy of it is dropped.
  const std::int64_t block = gpus_[gpu].cache->block_bytes();
  router_.release(gpu, r.rec.id);
  router_.reserve(gpu, r.rec.id, booked - static_cast<std::int64_t>(r.prefix_keys.size()) * block);
  pin_prefix(r, gpu, r.prefix_keys.size());
  // Written through to the node's host tier.
  const int node = node_of(gpu);
  if (PrefixCache* host = host_tiers_[static_cast<std::size_t>(node)].get()) {
    const auto written = static_cast<std::int64_t>(host->touch(r.prefix_keys));
    result_.prefix_cache.host.written_blocks += written;
    result_.prefix_cache.host.written_bytes += written * host->block_bytes();
    count_host_tier(written * host->block_bytes());
    // The copy runs beside decode and nothing waits for it, but it holds the host link.
    if (written > 0) host_copy(gpu, false, written * host->block_bytes());
    fit_host_tier(node);
    result_.prefix_cache.host.peak_bytes =  // once it fits
        std::max(result_.prefix_cache.host.peak_bytes, host_tier_bytes_);
  }
}

ServingModel::PrefixRun ServingModel::prefix_run(const Request& r, int gpu) const {
  const Gpu& g = gpus_[gpu];
  PrefixRun run;
  const std::span<const std::uint64_t> keys(r.prefix_keys);
  const auto node = static_cast<std::size_t>(g.node);
  run.in_hbm = g.cache->match(keys);
  const PrefixCache* host = host_tiers_[node].get();
  if (!host) return run;
  run.from_host = host->match(keys.subspan(run.in_hbm));
  if (const PrefixCache* ssd = ssd_tiers_[node].get()) {
    run.from_ssd = ssd->match(keys.subspan(run.in_hbm + run.from_host));
  }
  const std::int64_t block = host->block_bytes();
  const std::int64_t ssd_bytes = static_cast<std::int64_t>(run.from_ssd) * block;
  const std::int64_t bytes = static_cast<std::int64_t>(run.from_host) * block + ssd_bytes;
  if (bytes > 0) {  // read_tiers' copies, as they would go now
    const SimTime now = sim_.now();
    const SimTime ssd =
        ssd_bytes > 0 ? ssd_io_[node].backlog(now) + ssd_time(ssd_bytes, false) : SimTime{};
    run.load = std::max(ssd, g.to_gpu.backlog(now)) + host_link_time(bytes);
  }
  if (!storage_tier_ || !node_up_[storage_tier_node_]) return run;
  const std::size_t local = run.local();
  run.from_storage = storage_tier_->match(keys.subspan(local));
  if (run.from_storage == 0) return run;
  const std::optional<cost_model::Path> path =
      fabric_.path(node_id(storage_tier_node_), node_id(g.node));
  const BitsPerSecond share =
      fabric_.available_bandwidth(node_id(storage_tier_node_), node_id(g.node));
  if (!path || share.value <= 0) {
    run.from_storage = 0;
    return run;
  }
  const Bytes fetched{static_cast<std::int64_t>(run.from_storage) * block};
  const SimTime remote =
      SimTime{round_to_ns(path->latency.value) + round_to_ns(fetched.bits() / share.value)} +
      host_link_time(fetched.count);
  // Fetched only when that beats prefilling those blocks (a busy path to the store does not).
  const ServingCosts& c = costs_of(g.node);
  const std::int64_t block_tokens = spec_.serving.prefix_cache.block_tokens;
  const std::int64_t prompt = r.rec.prompt_tokens;
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

int ServingModel::route_arrival(const Request& r) {
  const PoolSet pools = deployment(r).arrival_pools;
  if (!router_.prefix_aware(pools) || r.prefix_keys.empty()) {
    return router_.route(r.reserved, -1, pools);
  }
  // Estimated time to the first token on each GPU with room: its queue, the load from the
  // lower tiers of what its HBM lacks, and the prefill of the rest; ties go to the lower share.
  const std::int64_t block_tokens = spec_.serving.prefix_cache.block_tokens;
  const std::int64_t prompt = r.rec.prompt_tokens;
  int best = -1;
  std::int64_t best_ns = 0;
  for (int gpu : router_.fitting(r.reserved, pools)) {
    const Gpu& g = gpus_[gpu];
    const PrefixRun run = prefix_run(r, gpu);
    const std::int64_t cached = static_cast<std::int64_t>(run.blocks()) * block_tokens;
    const std::int64_t ns =
        g.worker->backlog().ns + run.load.ns + costs_of(g.node).extend(cached, prompt - cached).ns;
    const auto share = [&](int i) {
      return static_cast<double>(router_.reserved(i)) / static_cast<double>(router_.capacity(i));
    };
    if (best < 0 || ns < best_ns || (ns == best_ns && share(gpu) < share(best))) {
      best = gpu;
      best_ns = ns;
    }
  }
  return best;
}

void ServingModel::fit_host_tier(int node) {
  if (node == storage_tier_node_) fit_storage_tier();  // its replicas may have taken room
  PrefixCache* host = host_tiers_[static_cast<std::size_t>(node)].get();
  if (!host) return;
  // Replicas come first: the tier keeps what is left of host DRAM.
  const std::int64_t room = replicas_->room(node);
  const std::int64_t over = host->unpinned_bytes() - room;
  if (over <= 0) return;
  std::vector<std::uint64_t> keys;
  const bool below = ssd_tiers_[static_cast<std::size_t>(node)] || storage_tier_;
  const auto evicted = static_cast<std::int64_t>(host->evict(over, below ? &keys : nullptr));
  result_.prefix_cache.host.evicted_blocks += evicted;
  count_host_tier(-evicted * host->block_bytes());
  if (host->unpinned_bytes() > room) {
    throw std::logic_error("invariant: node " + std::to_string(node) +
                           " holds more replicas and host-tier blocks than its host DRAM");
  }
  if (keys.empty()) return;
  if (ssd_tiers_[static_cast<std::size_t>(node)]) {
    spill_to_ssd(node, keys);
  } else {
    spill_to_storage(node, keys);
  }
}

SimTime ServingModel::ssd_time(std::int64_t bytes, bool write) const {
  if (bytes <= 0) return {};
  const PrefixCacheSpec::SsdTier& ssd = *spec_.serving.prefix_cache.ssd_tier;
  const BitsPerSecond rate = write ? ssd.write_bandwidth : ssd.read_bandwidth;
  return SimTime{round_to_ns(Bytes{bytes}.bits() / rate.value)};
}

void ServingModel::spill_to_ssd(int node, std::span<const std::uint64_t> keys) {
  PrefixCache& ssd = *ssd_tiers_[static_cast<std::size_t>(node)];
  PrefixCacheStats::Tier& st = result_.prefix_cache.ssd;
  const auto written = static_cast<std::int64_t>(ssd.touch(keys));
  st.written_blocks += written;
  st.written_bytes += written * ssd.block_bytes();
  ssd_tier_bytes_ += written * ssd.block_bytes();
  // The write takes its turn on the SSD: reads asked for after it wait for it.
  const SimTime now = sim_.now();
  ssd_io_[static_cast<std::size_t>(node)].copy(now, now,
                                               ssd_time(written * ssd.block_bytes(), true));
  const std::int64_t capacity = spec_.serving.prefix_cache.ssd_tier->capacity.count;
  const std::int64_t over = ssd.unpinned_bytes() - capacity;
  std::vector<std::uint64_t> evicted_keys;
  if (over > 0) {
    const auto evicted =
        static_cast<std::int64_t>(ssd.evict(over, storage_tier_ ? &evicted_keys : nullptr));
    st.evicted_blocks += evicted;
    ssd_tier_bytes_ -= evicted * ssd.block_bytes();
  }
  st.peak_bytes = std::max(st.peak_bytes, ssd_tier_bytes_);
  if (ssd.unpinned_bytes() > capacity) {
    throw std::logic_error("invariant: node " + std::to_string(node) +
                           " holds more SSD-tier blocks than the tier's capacity");
  }
  if (!evicted_keys.empty()) spill_to_storage(node, evicted_keys);
}

void ServingModel::spill_to_storage(int node, std::span<const std::uint64_t> keys) {
  // Without the node or a path to it, the blocks are dropped.
  if (!storage_tier_ || !node_up_[storage_tier_node_] ||
      !fabric_.reachable(node_id(node), node_id(storage_tier_node_))) {
    return;
  }
  PrefixCacheStats::Tier& st = result_.prefix_cache.storage;
  const std::int64_t block = storage_tier_->block_bytes();
  const auto written = static_cast<std::int64_t>(storage_tier_->touch(keys));
  st.written_blocks += written;
  st.written_bytes += written * block;
  storage_tier_bytes_ += written * block;
  // Over the network, beside everything else on the path; nothing waits for it.
  if (written > 0) {
    fabric_.send(node_id(node), node_id(storage_tier_node_), Bytes{written * block},
                 [](bool, const std::string&) {});
  }
  fit_storage_tier();
  st.peak_bytes = std::max(st.peak_bytes, storage_tier_bytes_);  // once it fits
}

void ServingModel::fit_storage_tier() {
  if (!storage_tier_) return;
  // Replicas there come first: the tier keeps what is left of the node's capacity.
  const int node = storage_tier_node_;
  const std::int64_t room = replicas_->room(node);
  const std::int64_t over = storage_tier_->unpinned_bytes() - room;
  if (over <= 0) return;
  const auto evicted = static_cast<std::int64_t>(storage_tier_->evict(over));
  result_.prefix_cache.storage.evicted_blocks += evicted;
  storage_tier_bytes_ -= evicted * storage_tier_->block_bytes();
  if (storage_tier_->unpinned_bytes() > room) {
    throw std::logic_error("invariant: storage node " + std::to_string(node) +
                           " holds more replicas and prefix blocks than its capacity");
  }
}

void ServingModel::fetch_then_prefill(Request& r, int gpu, std::size_t blocks, SimTime ready,
                                      GpuJob job) {
  const std::int64_t bytes = static_cast<std::int64_t>(blocks) * storage_tier_->block_bytes();
  const std::int64_t tokens =
      static_cast<std::int64_t>(blocks) * spec_.serving.prefix_cache.block_tokens;
  const std::uint64_t id = r.rec.id;
  const std::uint32_t epoch = r.epoch;
  auto done = [this, id, epoch, gpu, bytes, tokens, ready, job = std::move(job)](
                  bool delivered, const std::string&) mutable {
    Request* rp = find_request(id);
    if (!rp || rp->epoch != epoch || rp->gpu != gpu) return;
    SimTime at = std::max(ready, sim_.now());
    if (delivered) {
      at = std::max(at, host_copy(gpu, true, bytes));
    } else {  // the storage node or the path failed: those blocks are prefilled instead
      ++result_.prefix_cache.storage.failed_reads;
      job.prefix -= tokens;
      job.tokens += tokens;
    }
    sim_.schedule_at(at, [this, id, epoch, gpu, job = std::move(job)]() mutable {
      Request* q = find_request(id);
      if (q && q->epoch == epoch && q->gpu == gpu) gpus_[gpu].worker->submit(std::move(job));
    });
  };
  fabric_.send(node_id(storage_tier_node_), node_id(node_of(gpu)), Bytes{bytes}, std::move(done));
}

void ServingModel::count_host_tier(std::int64_t delta_bytes) { host_tier_bytes_ += delta_bytes; }

std::int64_t ServingModel::pinned_bytes(const Request& r) const {
  return r.pinned == 0
             ? 0
             : static_cast<std::int64_t>(r.pinned) * gpus_[r.pin_gpu].cache->block_bytes();
}

void ServingModel::unpin_prefix(Request& r) {
  if (r.pin_gpu < 0) return;
  unpin_blocks(r.pin_gpu, std::span<const std::uint64_t>(r.prefix_keys).first(r.pinned),
               r.pin_generation);
  r.pinned = 0;
  r.pin_gpu = -1;
}

void ServingModel::fit_cache(int gpu) {
  PrefixCache* cache = gpus_[gpu].cache.get();
  if (!cache) return;
  const std::int64_t over = router_.reserved(gpu) + cache->unpinned_bytes() - router_.capacity(gpu);
  if (over <= 0) return;
  result_.prefix_cache.evicted_blocks += static_cast<std::int64_t>(cache->evict(over));
  if (router_.reserved(gpu) + cache->unpinned_bytes() > router_.capacity(gpu)) {
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " holds more KV and cached blocks than its HBM");
  }
}

}  // namespace kvshift::sim
