#include "sim/serving/request_router.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvshift::sim {
namespace {

// Prefix-aware arrivals are placed by the serving model (it knows the caches); the router
// orders that pool's GPUs as least loaded, for moves.
bool indexed(Router policy) {
  return policy == Router::kLeastLoaded || policy == Router::kKvAware ||
         policy == Router::kPrefixAware;
}

bool in(PoolSet pools, int pool) { return pool < 64 && ((pools >> pool) & 1U) != 0; }

}  // namespace

RequestRouter::RequestRouter(Router policy, std::uint64_t seed) : rng_(seed) {
  pools_.emplace_back().policy = policy;
}

int RequestRouter::add_pool(Router policy) {
  pools_.emplace_back().policy = policy;
  return static_cast<int>(pools_.size()) - 1;
}

int RequestRouter::add_gpu(int node, std::int64_t capacity, int pool) {
  if (pool < 0 || static_cast<std::size_t>(pool) >= pools_.size()) {
    throw std::logic_error("router: GPU added to pool " + std::to_string(pool) +
                           ", which does not exist");
  }
  gpus_.push_back({node, pool, capacity, 0, 0, 0, true, {}});
  const int index = static_cast<int>(gpus_.size()) - 1;
  pools_[static_cast<std::size_t>(pool)].gpus.push_back(index);
  reindex(index, 0);
  return index;
}

double RequestRouter::share(int gpu) const {
  const Gpu& g = at(gpu);
  return static_cast<double>(g.reserved) / static_cast<double>(g.capacity);
}

void RequestRouter::reindex(int gpu, std::int64_t reserved) {
  Gpu& g = at(gpu);
  g.reserved = reserved;
  Pool& p = pools_[static_cast<std::size_t>(g.pool)];
  if (!indexed(p.policy)) return;
  if (g.open) {
    p.by_load.set(gpu, p.policy == Router::kKvAware ? static_cast<double>(g.reserved) : share(gpu));
  } else {
    p.by_load.erase(gpu);
  }
}

void RequestRouter::set_open(int gpu, bool open) {
  at(gpu).open = open;
  reindex(gpu, at(gpu).reserved);
}

std::int64_t RequestRouter::held(int gpu, std::uint64_t request) const {
  const auto& m = at(gpu).members;
  const auto it = m.find(request);
  return it == m.end() ? 0 : it->second;
}

void RequestRouter::reserve(int gpu, std::uint64_t request, std::int64_t bytes) {
  Gpu& g = at(gpu);
  reindex(gpu, g.reserved + bytes);
  if (g.reserved > g.capacity || !g.members.emplace(request, bytes).second) {
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " over its KV capacity or request " + std::to_string(request) +
                           " reserved twice");
  }
}

void RequestRouter::set_watermark(double share) {
  for (Gpu& g : gpus_) {
    g.watermark = static_cast<std::int64_t>(share * static_cast<double>(g.capacity));
  }
}

void RequestRouter::grow(int gpu, std::uint64_t request, std::int64_t bytes) {
  Gpu& g = at(gpu);
  const auto it = g.members.find(request);
  if (it == g.members.end() || bytes < 0 || g.reserved + bytes > g.capacity) {
    throw std::logic_error("invariant: request " + std::to_string(request) + " grew on GPU " +
                           std::to_string(gpu) +
                           " without a reservation there, or over its KV capacity");
  }
  it->second += bytes;
  reindex(gpu, g.reserved + bytes);
}

void RequestRouter::release(int gpu, std::uint64_t request) {
  Gpu& g = at(gpu);
  const auto it = g.members.find(request);
  if (it == g.members.end()) {
    throw std::logic_error("invariant: request " + std::to_string(request) +
                           " released KV it did not hold on GPU " + std::to_string(gpu));
  }
  const std::int64_t bytes = it->second;
  g.members.erase(it);
  reindex(gpu, g.reserved - bytes);
}

void RequestRouter::set_cached(int gpu, std::int64_t bytes) {
  Gpu& g = at(gpu);
  reindex(gpu, g.reserved - g.cached + bytes);
  g.cached = bytes;
  if (g.reserved > g.capacity) {
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " over its KV capacity with its pinned prefix blocks");
  }
}

std::vector<std::uint64_t> RequestRouter::clear(int gpu) {
  Gpu& g = at(gpu);
  g.cached = 0;
  std::vector<std::uint64_t> held;
  held.reserve(g.members.size());
  for (const auto& [request, bytes] : g.members) held.push_back(request);
  g.members.clear();
  reindex(gpu, 0);
  return held;
}

bool RequestRouter::fits(int gpu, std::int64_t bytes, int exclude_node) const {
  const Gpu& g = at(gpu);
  return g.open && g.node != exclude_node && g.capacity - g.reserved - g.watermark >= bytes;
}

int RequestRouter::route_in(Pool& p, std::int64_t bytes, int exclude_node, const Accept& accept) {
  auto ok = [&](int gpu) {
    return fits(gpu, bytes, exclude_node) && (!accept || accept(at(gpu).node));
  };
  if (indexed(p.policy)) {
    // Smallest load first (ties by index); usually the first one fits.
    int pick = -1;
    p.by_load.visit_in_order([&](int index) {
      if (ok(index)) pick = index;
      return pick >= 0;
    });
    return pick;
  }
  std::vector<int> candidates;
  for (int gpu : p.gpus) {
    if (ok(gpu)) candidates.push_back(gpu);
  }
  if (candidates.empty()) return -1;
  if (p.policy == Router::kRandom) {
    return candidates[static_cast<std::size_t>(
        rng_.uniform_int(0, static_cast<std::int64_t>(candidates.size()) - 1))];
  }
  // Round robin: the first candidate at or after the cursor, in pool order.
  const std::size_t n = p.gpus.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t slot = (p.round_robin + k) % n;
    if (std::find(candidates.begin(), candidates.end(), p.gpus[slot]) != candidates.end()) {
      p.round_robin = slot + 1;
      return p.gpus[slot];
    }
  }
  return candidates.front();
}

bool RequestRouter::prefix_aware(PoolSet pools) const {
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    if (in(pools, static_cast<int>(i)) && pools_[i].policy == Router::kPrefixAware) return true;
  }
  return false;
}

std::vector<int> RequestRouter::fitting(std::int64_t bytes, PoolSet pools) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    if (!in(pools, static_cast<int>(i))) continue;
    for (int gpu : pools_[i].gpus) {
      if (fits(gpu, bytes, -1)) out.push_back(gpu);
    }
  }
  return out;
}

int RequestRouter::route(std::int64_t bytes, int exclude_node, PoolSet pools) {
  int best = -1;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    if (!in(pools, static_cast<int>(i))) continue;
    const int pick = route_in(pools_[i], bytes, exclude_node, {});
    if (pick >= 0 && (best < 0 || share(pick) < share(best))) best = pick;
  }
  return best;
}

void RequestRouter::destinations_in(Pool& p, std::int64_t bytes, int exclude_node, std::size_t k,
                                    const Accept& accept, std::vector<int>& out) {
  auto take = [&](int index) {
    for (int o : out) {
      if (at(o).node == at(index).node) return;
    }
    out.push_back(index);
  };
  auto ok = [&](int gpu) {
    return fits(gpu, bytes, exclude_node) && (!accept || accept(at(gpu).node));
  };
  if (indexed(p.policy)) {
    p.by_load.visit_in_order([&](int index) {
      if (out.size() >= k) return true;
      if (ok(index)) take(index);
      return false;
    });
    return;
  }
  // The policy's own pick first (the same draws as for an arrival), then the rest by index.
  const int first = route_in(p, bytes, exclude_node, accept);
  if (first < 0) return;
  take(first);
  for (std::size_t i = 0; i < p.gpus.size() && out.size() < k; ++i) {
    if (ok(p.gpus[i])) take(p.gpus[i]);
  }
}

std::vector<int> RequestRouter::destinations(std::int64_t bytes, int exclude_node, std::size_t k,
                                             PoolSet pools, const Accept& accept) {
  std::vector<std::vector<int>> lists;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    if (!in(pools, static_cast<int>(i))) continue;
    std::vector<int> list;
    destinations_in(pools_[i], bytes, exclude_node, k, accept, list);
    if (!list.empty()) lists.push_back(std::move(list));
  }
  if (lists.size() == 1) return std::move(lists.front());
  std::stable_sort(lists.begin(), lists.end(), [&](const auto& a, const auto& b) {
    return share(a.front()) < share(b.front());
  });
  std::vector<int> out;
  for (const auto& list : lists) {
    for (int gpu : list) {
      if (out.size() >= k) return out;
      const bool same_node =
          std::any_of(out.begin(), out.end(), [&](int o) { return at(o).node == at(gpu).node; });
      if (!same_node) out.push_back(gpu);
    }
  }
  return out;
}

}  // namespace kvshift::sim
