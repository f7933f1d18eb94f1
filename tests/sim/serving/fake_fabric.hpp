// A fabric for tests of the parts that send over it: every pair of nodes is
// 1 Gbps with 1 ms one way, and flows never share a link.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/serving/fabric.hpp"
#include "sim/simulator.hpp"

namespace kvshift::sim {

/// A transfer of b bytes takes 1 ms + 8 ns a byte; every node reaches every other.
class FakeFabric final : public Fabric {
 public:
  explicit FakeFabric(Simulator& sim) : sim_(sim) {}
  std::uint64_t send(NodeId, NodeId, Bytes bytes, Done done) override {
    const std::uint64_t handle = ++handles_;
    ++sent;
    const SimTime at{sim_.now().ns + 1'000'000 + bytes.count * 8};  // 1 ms + 8 ns a byte
    events_[handle] = sim_.schedule_at(at, [this, handle, done] {
      events_.erase(handle);
      done(true, "");
    });
    return handle;
  }
  void cancel(std::uint64_t transfer) override {
    const auto it = events_.find(transfer);
    if (it == events_.end()) return;
    ++cancelled;
    sim_.cancel(it->second);
    events_.erase(it);
  }
  std::optional<cost_model::Path> path(NodeId, NodeId) override {
    return cost_model::Path{BitsPerSecond{1e9}, Seconds{1e-3}};
  }
  bool reachable(NodeId, NodeId) override { return true; }
  BitsPerSecond available_bandwidth(NodeId, NodeId) override { return BitsPerSecond{1e9}; }
  void fail_node(NodeId) override {}
  void repair_node(NodeId) override {}
  void degrade_link(const std::string&, std::optional<BitsPerSecond>,
                    std::optional<SimTime>) override {}
  void fail_link(const std::string&) override {}
  void repair_link(const std::string&) override {}
  const std::vector<LinkCounter>& link_counters() override { return counters_; }

  int sent = 0, cancelled = 0;
  std::size_t in_flight() const { return events_.size(); }

 private:
  Simulator& sim_;
  std::uint64_t handles_ = 0;
  std::map<std::uint64_t, EventId> events_;
  std::vector<LinkCounter> counters_;
};

}  // namespace kvshift::sim
