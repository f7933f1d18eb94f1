#include "sim/serving/replica_streams.hpp"

#include <cmath>
#include <string>

namespace kvshift::sim {

ReplicaStreams::ReplicaStreams(Parts parts, const cost_model::TransferEngine& engine,
                               bool stall_timeout, Landed landed)
    : p_(parts), engine_(engine), stall_timeout_(stall_timeout), landed_(std::move(landed)) {}

void ReplicaStreams::send(int gpu, int node, const Kept& kept,
                          std::span<std::pair<int, Part>> due) {
  if (kept.per_token <= 0) return;
  // A stable insertion sort groups the parts by replica (a batch is small, and it allocates
  // nothing).
  for (std::size_t i = 1; i < due.size(); ++i) {
    for (std::size_t j = i; j > 0 && due[j - 1].first > due[j].first; --j) {
      std::swap(due[j - 1], due[j]);
    }
  }
  for (std::size_t begin = 0, end; begin < due.size(); begin = end) {
    const int replica = due[begin].first;
    std::uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<std::uint32_t>(flushes_.size());
      flushes_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    Flush& flush = flushes_[slot];
    flush.replica = replica;
    flush.per_token = kept.per_token;
    flush.parts.clear();
    std::int64_t bytes = 0, descriptors = 0;
    for (end = begin; end < due.size() && due[end].first == replica; ++end) {
      const Part& part = due[end].second;
      bytes += part.tokens * kept.per_token;
      if (!engine_.ideal()) descriptors += this->descriptors(kept, part.tokens);
      flush.parts.push_back(part);
    }
    Fabric::Done done = [this, slot](bool delivered, const std::string&) {
      on_flushed(slot, delivered);
    };
    // The transfer engine posts the flush's descriptors first, as for any KV transfer.
    const std::int64_t setup = cost_model::engine_ns(engine_, descriptors);
    if (setup > 0) {
      p_.sim.schedule_after(SimTime{setup},
                            [this, gpu, node, replica, bytes, done = std::move(done)]() mutable {
                              post(gpu, node, replica, bytes, std::move(done));
                            });
    } else {
      post(gpu, node, replica, bytes, std::move(done));
    }
  }
}

std::int64_t ReplicaStreams::descriptors(const Kept& kept, std::int64_t tokens) const {
  const std::int64_t rows =
      kept.share == 1 ? tokens : std::llround(kept.share * static_cast<double>(tokens));
  return cost_model::kv_descriptors(engine_, rows, kept.layers);
}

void ReplicaStreams::post(int gpu, int node, int replica, std::int64_t bytes, Fabric::Done done) {
  if (node == replica) {  // into its own node's host DRAM, over the GPU's host link
    p_.sim.schedule_at(p_.links.copy(gpu, false, bytes), [this, node, done = std::move(done)] {
      done(p_.node_up[static_cast<std::size_t>(node)], "node failed");
    });
    return;
  }
  const std::optional<EventKind> fault = p_.faults.at(node, replica);
  if (!fault) {
    p_.fabric.send(static_cast<NodeId>(node), static_cast<NodeId>(replica), Bytes{bytes},
                   std::move(done));
  } else if (*fault == EventKind::kPathFailure || stall_timeout_) {
    // A failed path loses the flush; so does a stall with a timeout (the flush would time out).
    p_.sim.schedule_after(SimTime{}, [done] { done(false, "path fault"); });
  } else {  // a stall without a timeout: the flush waits for it to clear
    p_.faults.when_clears(node, replica, [this, gpu, node, replica, bytes, done] {
      post(gpu, node, replica, bytes, done);
    });
  }
}

void ReplicaStreams::on_flushed(std::uint32_t slot, bool delivered) {
  free_.push_back(slot);   // free already: landed_ sends no flush
  if (!delivered) return;  // its requests re-stream if they still need to
  const Flush& flush = flushes_[slot];
  landed_(flush.replica, flush.per_token, flush.parts);
}

}  // namespace kvshift::sim
