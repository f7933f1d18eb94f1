#include "sim/serving/request_router.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvshift::sim {

RequestRouter::RequestRouter(Router policy, std::uint64_t seed) : policy_(policy), rng_(seed) {}

int RequestRouter::add_gpu(int node, std::int64_t capacity) {
  gpus_.push_back({node, capacity, 0, true, {}});
  const int index = static_cast<int>(gpus_.size()) - 1;
  reindex(index, 0);
  return index;
}

void RequestRouter::reindex(int gpu, std::int64_t reserved) {
  Gpu& g = at(gpu);
  g.reserved = reserved;
  if (g.open) {
    by_load_.set(gpu, static_cast<double>(g.reserved) / static_cast<double>(g.capacity));
  } else {
    by_load_.erase(gpu);
  }
}

void RequestRouter::set_open(int gpu, bool open) {
  at(gpu).open = open;
  reindex(gpu, at(gpu).reserved);
}

void RequestRouter::reserve(int gpu, std::uint64_t request, std::int64_t bytes) {
  Gpu& g = at(gpu);
  reindex(gpu, g.reserved + bytes);
  if (g.reserved > g.capacity || !g.members.insert(request).second) {
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " over its KV capacity or request " + std::to_string(request) +
                           " reserved twice");
  }
}

void RequestRouter::release(int gpu, std::uint64_t request, std::int64_t bytes) {
  Gpu& g = at(gpu);
  reindex(gpu, g.reserved - bytes);
  if (g.reserved < 0 || g.members.erase(request) != 1) {
    throw std::logic_error("invariant: request " + std::to_string(request) +
                           " released KV it did not hold on GPU " + std::to_string(gpu));
  }
}

std::vector<std::uint64_t> RequestRouter::clear(int gpu) {
  Gpu& g = at(gpu);
  std::vector<std::uint64_t> held(g.members.begin(), g.members.end());
  g.members.clear();
  reindex(gpu, 0);
  return held;
}

bool RequestRouter::fits(int gpu, std::int64_t bytes, int exclude_node) const {
  const Gpu& g = at(gpu);
  return g.open && g.node != exclude_node && g.capacity - g.reserved >= bytes;
}

int RequestRouter::route(std::int64_t bytes, int exclude_node) {
  if (policy_ == Router::kLeastLoaded) {
    // Smallest reserved share first (ties by index); usually the first one fits.
    int pick = -1;
    by_load_.visit_in_order([&](int index) {
      if (fits(index, bytes, exclude_node)) pick = index;
      return pick >= 0;
    });
    return pick;
  }
  std::vector<int> candidates;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (fits(static_cast<int>(i), bytes, exclude_node)) candidates.push_back(static_cast<int>(i));
  }
  if (candidates.empty()) return -1;
  if (policy_ == Router::kRandom) {
    return candidates[static_cast<std::size_t>(
        rng_.uniform_int(0, static_cast<std::int64_t>(candidates.size()) - 1))];
  }
  for (std::size_t k = 0; k < gpus_.size(); ++k) {  // round robin
    const int candidate = static_cast<int>((round_robin_ + k) % gpus_.size());
    if (std::find(candidates.begin(), candidates.end(), candidate) != candidates.end()) {
      round_robin_ = static_cast<std::size_t>(candidate) + 1;
      return candidate;
    }
  }
  return candidates.front();
}

std::vector<int> RequestRouter::destinations(std::int64_t bytes, int exclude_node, std::size_t k) {
  std::vector<int> out;
  auto take = [&](int index) {
    for (int o : out) {
      if (at(o).node == at(index).node) return;
    }
    out.push_back(index);
  };
  if (policy_ == Router::kLeastLoaded) {
    by_load_.visit_in_order([&](int index) {
      if (out.size() >= k) return true;
      if (fits(index, bytes, exclude_node)) take(index);
      return false;
    });
    return out;
  }
  // The policy's own pick first (the same draws as for an arrival), then the rest by index.
  const int first = route(bytes, exclude_node);
  if (first < 0) return out;
  out.push_back(first);
  for (std::size_t i = 0; i < gpus_.size() && out.size() < k; ++i) {
    if (fits(static_cast<int>(i), bytes, exclude_node)) take(static_cast<int>(i));
  }
  return out;
}

}  // namespace kvshift::sim
