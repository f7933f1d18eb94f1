// HostLinks: every GPU's link to its host (PCIe or NVLink-C2C), each way. Tier
// loads, write-through, local replicas and moves, and swaps take turns on it
// (copy_queue.hpp); the run's stats count the bytes and the time.
#pragma once

#include <cstdint>
#include <vector>

#include "cost_model/move_plan.hpp"
#include "sim/serving/copy_queue.hpp"
#include "sim/serving/results.hpp"
#include "sim/simulator.hpp"

namespace kvshift::sim {

class HostLinks {
 public:
  HostLinks(const Simulator& sim, BitsPerSecond bandwidth, HostLinkStats& stats)
      : sim_(sim), bandwidth_(bandwidth), stats_(stats) {}

  void add_gpu() { links_.emplace_back(); }

  /// How long `bytes` take on an idle link (the estimator's local leg).
  SimTime time(std::int64_t bytes) const {
    return SimTime{
        cost_model::leg_ns(cost_model::MoveRoute::Leg::kLocal, {}, bandwidth_, Bytes{bytes})};
  }
  /// Copies `bytes` over `gpu`'s link, towards the GPU or from it, once `ready` (and the
  /// copies asked for before it) allow; returns when it ends.
  SimTime copy(int gpu, bool to_gpu, std::int64_t bytes, SimTime ready = {}) {
    Link& l = links_[static_cast<std::size_t>(gpu)];
    (to_gpu ? stats_.to_gpu_bytes : stats_.from_gpu_bytes) += bytes;
    return (to_gpu ? l.to_gpu : l.from_gpu).copy(sim_.now(), ready, time(bytes));
  }
  /// How long a copy towards `gpu` asked for now would wait for those ahead of it.
  SimTime backlog_to_gpu(int gpu) const {
    return links_[static_cast<std::size_t>(gpu)].to_gpu.backlog(sim_.now());
  }
  /// `gpu` failed: copies to or from its HBM are gone.
  void clear(int gpu) {
    Link& l = links_[static_cast<std::size_t>(gpu)];
    l.to_gpu.clear(sim_.now());
    l.from_gpu.clear(sim_.now());
  }
  /// At the end of the run: every link's copy time and waits join the stats.
  void close() {
    for (const Link& l : links_) {
      stats_.busy_ns += l.to_gpu.busy_ns() + l.from_gpu.busy_ns();
      stats_.waited_ns += l.to_gpu.waited_ns() + l.from_gpu.waited_ns();
    }
  }

 private:
  struct Link {
    CopyQueue to_gpu, from_gpu;
  };
  const Simulator& sim_;
  BitsPerSecond bandwidth_;
  HostLinkStats& stats_;
  std::vector<Link> links_;  ///< by GPU index
};

}  // namespace kvshift::sim
