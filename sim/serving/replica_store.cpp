#include "sim/serving/replica_store.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvshift::sim {

ReplicaStore::ReplicaStore(std::vector<NodeKind> kinds, std::vector<std::int64_t> capacity,
                           ReplicaPlacement placement, int storage_node)
    : kinds_(std::move(kinds)),
      capacity_(std::move(capacity)),
      booked_(kinds_.size(), 0),
      swapped_(kinds_.size(), 0),
      placement_(placement),
      storage_node_(storage_node),
      held_(kinds_.size(), 0) {}

int ReplicaStore::pick(int gpu_node, std::int64_t bytes,
                       const std::function<bool(int)>& usable) const {
  const int n = static_cast<int>(kinds_.size());
  auto fits = [&](int i) { return room(i) >= bytes; };
  auto ok = [&](int i) {
    return i != gpu_node && kinds_[static_cast<std::size_t>(i)] != NodeKind::kSwitch && fits(i) &&
           usable(i);
  };
  switch (placement_) {
    case ReplicaPlacement::kLocal:
      return fits(gpu_node) && usable(gpu_node) ? gpu_node : -1;
    case ReplicaPlacement::kStorage:
      return storage_node_ >= 0 && ok(storage_node_) ? storage_node_ : -1;
    case ReplicaPlacement::kNextNode:
      for (int k = 1; k < n; ++k) {
        const int i = (gpu_node + k) % n;
        if (kinds_[static_cast<std::size_t>(i)] == NodeKind::kGpu && ok(i)) return i;
      }
      return -1;
    case ReplicaPlacement::kLeastLoaded: {
      int best = -1;
      for (int i = 0; i < n; ++i) {
        if (ok(i) && (best < 0 || held(i) < held(best))) best = i;
      }
      return best;
    }
  }
  return -1;
}

void ReplicaStore::book(int node, std::int64_t bytes) {
  std::int64_t& b = booked_[static_cast<std::size_t>(node)];
  b += bytes;
  if (b > capacity(node)) {
    throw std::logic_error("invariant: replicas over the capacity of node " + std::to_string(node));
  }
  peak_share_ = std::max(
      peak_share_, static_cast<double>(b - swapped(node)) / static_cast<double>(capacity(node)));
}

void ReplicaStore::book_swap(int node, std::int64_t bytes) {
  std::int64_t& b = booked_[static_cast<std::size_t>(node)];
  if (b + bytes > capacity(node)) {
    throw std::logic_error("invariant: swapped KV over the host DRAM of node " +
                           std::to_string(node));
  }
  b += bytes;
  swapped_[static_cast<std::size_t>(node)] += bytes;
}

void ReplicaStore::unbook_swap(int node, std::int64_t bytes) {
  std::int64_t& s = swapped_[static_cast<std::size_t>(node)];
  s -= bytes;
  booked_[static_cast<std::size_t>(node)] -= bytes;
  if (s < 0) {
    throw std::logic_error("invariant: swapped KV below zero on node " + std::to_string(node));
  }
}

void ReplicaStore::unbook(int node, std::int64_t bytes) {
  std::int64_t& b = booked_[static_cast<std::size_t>(node)];
  b -= bytes;
  if (b < 0) {
    throw std::logic_error("invariant: replica room below zero on node " + std::to_string(node));
  }
}

void ReplicaStore::add(int node, std::int64_t bytes, std::int64_t full_equiv) {
  held_[static_cast<std::size_t>(node)] += bytes;
  total_ += bytes;
  full_equiv_ += full_equiv;
  if (total_ > peak_) {
    peak_ = total_;
    peak_full_equiv_ = full_equiv_;
  }
}

void ReplicaStore::remove(int node, std::int64_t bytes, std::int64_t full_equiv) {
  held_[static_cast<std::size_t>(node)] -= bytes;
  total_ -= bytes;
  full_equiv_ -= full_equiv;
  if (held_[static_cast<std::size_t>(node)] < 0 || total_ < 0) {
    throw std::logic_error("invariant: replica bytes below zero on node " + std::to_string(node));
  }
}

}  // namespace kvshift::sim
