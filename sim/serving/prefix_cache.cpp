#include "sim/serving/prefix_cache.hpp"

#include <stdexcept>
#include <string>

namespace kvshift::sim {

std::size_t PrefixCache::match(std::span<const std::uint64_t> keys) const {
  std::size_t n = 0;
  while (n < keys.size() && blocks_.count(keys[n]) > 0) ++n;
  return n;
}

std::size_t PrefixCache::pin(std::span<const std::uint64_t> keys) {
  std::size_t inserted = 0;
  for (std::uint64_t key : keys) {
    auto [it, fresh] = blocks_.try_emplace(key);
    Block& b = it->second;
    inserted += fresh ? 1 : 0;
    if (!fresh && b.users == 0) lru_.erase(b.lru);
    if (b.users++ == 0) ++pinned_blocks_;
  }
  return inserted;
}

// Released blocks join the LRU list back to front, so a chain's head is the most recently
// used and its tail goes first: a run is matched from its head, and a cached tail without its
// head could never be hit.

void PrefixCache::unpin(std::span<const std::uint64_t> keys) {
  for (auto it_key = keys.rbegin(); it_key != keys.rend(); ++it_key) {
    const std::uint64_t key = *it_key;
    const auto it = blocks_.find(key);
    if (it == blocks_.end() || it->second.users == 0) {
      throw std::logic_error("invariant: prefix block " + std::to_string(key) +
                             " unpinned without a pin");
    }
    Block& b = it->second;
    if (--b.users == 0) {
      --pinned_blocks_;
      b.lru = lru_.insert(lru_.end(), key);
    }
  }
}

std::size_t PrefixCache::touch(std::span<const std::uint64_t> keys) {
  std::size_t inserted = 0;
  for (std::uint64_t key : keys) {
    auto [it, fresh] = blocks_.try_emplace(key);
    Block& b = it->second;
    if (fresh) {
      ++inserted;
      b.lru = lru_.insert(lru_.end(), key);
    } else if (b.users == 0) {
      lru_.splice(lru_.end(), lru_, b.lru);
    }
  }
  return inserted;
}

std::size_t PrefixCache::evict(std::int64_t bytes, std::vector<std::uint64_t>* keys) {
  std::size_t evicted = 0;
  for (std::int64_t freed = 0; freed < bytes && !lru_.empty(); freed += block_bytes_) {
    if (keys) keys->push_back(lru_.front());
    blocks_.erase(lru_.front());
    lru_.pop_front();
    ++evicted;
  }
  return evicted;
}

void PrefixCache::clear() {
  blocks_.clear();
  lru_.clear();
  pinned_blocks_ = 0;
  ++generation_;
}

int PrefixCache::users(std::uint64_t key) const {
  const auto it = blocks_.find(key);
  return it == blocks_.end() ? 0 : it->second.users;
}

}  // namespace kvshift::sim
