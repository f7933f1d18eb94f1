// PrefixCache: the prompt KV blocks one GPU keeps for reuse (automatic prefix
// caching, as vLLM and SGLang do it). A block is `block_tokens` prompt tokens
// named by a key that stands for everything up to its end (a Mooncake
// hash_id, or a synthetic shared prefix's group and block index), so equal
// keys mean equal prefixes and a request reuses the longest run of its
// leading keys that is cached.
//
// A block is pinned while requests use it, however many: its bytes are
// counted once, as the GPU's pinned cache bytes (the router books them like a
// reservation). Unpinned blocks stay in HBM's free room and are evicted least
// recently used first whenever a reservation needs the room; a request
// releases its blocks back to front, so a chain's tail is evicted before its
// head, as vLLM frees a request's blocks in reverse. A GPU failure loses the whole cache: clear()
// bumps the generation, so pins taken before it are not released twice. The same class keeps the
// copy tiers (a node's host DRAM and SSD, the storage node), which are only touched, never pinned:
// touched front to back, they evict a chain's head first, so the tier below them — in the end the
// storage node every GPU node shares — gets the heads, which a request on any node can reach (a run
// is matched from its head).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvshift::sim {

/// Leading prefix blocks pinned in one GPU's cache, of that cache's generation.
struct PrefixPins {
  std::size_t blocks = 0;
  std::uint64_t generation = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(std::int64_t block_bytes) : block_bytes_(block_bytes) {}

  std::int64_t block_bytes() const { return block_bytes_; }
  /// Bumped by clear(): pins carry it so that a lost cache is not unpinned.
  std::uint64_t generation() const { return generation_; }

  /// How many leading keys are cached (the reusable prefix, in blocks).
  std::size_t match(std::span<const std::uint64_t> keys) const;
  /// Pins every key, inserting the missing ones; returns how many were inserted.
  std::size_t pin(std::span<const std::uint64_t> keys);
  /// Unpins every key (each pinned by the caller before); blocks nobody uses become evictable.
  void unpin(std::span<const std::uint64_t> keys);
  /// Inserts the missing keys unpinned and makes every unpinned key most recently used, in
  /// order (a tier that holds copies and takes no pins); returns how many were inserted.
  std::size_t touch(std::span<const std::uint64_t> keys);
  /// Evicts least recently used unpinned blocks until `bytes` are freed or none is left;
  /// returns the blocks evicted, and appends their keys to `evicted` when given (in eviction
  /// order: least recently used first).
  std::size_t evict(std::int64_t bytes, std::vector<std::uint64_t>* evicted = nullptr);
  /// The GPU lost its HBM: every block is gone.
  void clear();

  std::int64_t pinned_bytes() const { return pinned_blocks_ * block_bytes_; }
  std::int64_t unpinned_bytes() const {
    return static_cast<std::int64_t>(lru_.size()) * block_bytes_;
  }
  std::size_t blocks() const { return blocks_.size(); }
  /// Pins held on `key` (0 when unpinned or absent).
  int users(std::uint64_t key) const;

 private:
  struct Block {
    int users = 0;
    std::list<std::uint64_t>::iterator lru;  ///< valid while users == 0
  };
  std::int64_t block_bytes_;
  std::uint64_t generation_ = 0;
  std::int64_t pinned_blocks_ = 0;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::list<std::uint64_t> lru_;  ///< unpinned blocks, least recently used first
};

}  // namespace kvshift::sim
