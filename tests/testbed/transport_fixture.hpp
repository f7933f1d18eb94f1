// Two agents on loopback and a collector of transfer outcomes and deliveries,
// shared by the transport tests. Every wait is bounded.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "testbed/agent.hpp"

namespace kvshift::testbed::testing {

/// Outcomes and deliveries, keyed by transfer id, counted so "exactly once" can be checked.
class Collector {
 public:
  void on_done(const TransferResult& r) {
    std::lock_guard lock(mu_);
    ++ends_[r.id];
    results_[r.id] = r;
    ++ended_;
    cv_.notify_all();
  }
  void on_delivery(Delivery&& d) {
    std::lock_guard lock(mu_);
    ++deliveries_count_[d.id];
    deliveries_[d.id] = std::move(d);
  }
  /// Waits until `n` transfers have ended or `limit` passed; returns whether they all did.
  bool wait_for(std::size_t n, std::chrono::seconds limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return ended_ >= n; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t ended_ = 0;
  std::map<std::uint64_t, int> ends_, deliveries_count_;
  std::map<std::uint64_t, TransferResult> results_;
  std::map<std::uint64_t, Delivery> deliveries_;
};

inline std::shared_ptr<std::vector<std::uint8_t>> random_payload(std::size_t n, unsigned seed) {
  auto p = std::make_shared<std::vector<std::uint8_t>>(n);
  std::mt19937 rng(seed);
  for (auto& b : *p) b = static_cast<std::uint8_t>(rng());
  return p;
}

}  // namespace kvshift::testbed::testing
