#include "sim/serving/network_fabric.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvshift::sim {
Topology build_topology(const ClusterSpec& cluster, const std::string& gpu_model) {
  Cluster c = cluster;
  for (ClusterNode& n : c.nodes) {
    if (n.kind == NodeKind::kGpu) n.gpu_model = gpu_model;
  }
  return Topology(c);
}

NetworkFabric::NetworkFabric(Simulator& sim, const ClusterSpec& cluster,
                             const std::string& gpu_model)
    : topology_(build_topology(cluster, gpu_model)) {
  NetworkOptions options;
  options.record_utilisation = false;
  options.keep_ended = false;  // a serving run ends millions of transfers
  options.ecmp = cluster.ecmp_seed.has_value();
  options.ecmp_seed = cluster.ecmp_seed.value_or(0);
  network_ = std::make_unique<Network>(sim, topology_, options);
}

std::uint64_t NetworkFabric::send(NodeId src, NodeId dst, Bytes bytes, Done done) {
  TransferRequest req;
  req.src = src;
  req.dst = dst;
  req.size = bytes;
  req.start = network_->simulator().now();
  std::uint32_t slot;
  if (free_dones_.empty()) {
    slot = static_cast<std::uint32_t>(dones_.size());
    dones_.push_back(std::move(done));
  } else {
    slot = free_dones_.back();
    free_dones_.pop_back();
    dones_[slot] = std::move(done);
  }
  req.on_done = [this, slot](const TransferInfo& info) {
    const Done finished = std::move(dones_[slot]);  // the slot is free before it runs
    dones_[slot] = nullptr;
    free_dones_.push_back(slot);
    if (info.state == TransferState::kCancelled) return;
    finished(info.state == TransferState::kFinished, info.reason);
  };
  if (req.start.ns != starting_at_) {
    starting_.clear();
    starting_at_ = req.start.ns;
  }
  const TransferId id = network_->submit(std::move(req));
  starting_.push_back({id, src, dst});
  return id;
}

void NetworkFabric::cancel(std::uint64_t transfer) {
  network_->cancel(static_cast<TransferId>(transfer));
}

std::optional<cost_model::Path> NetworkFabric::path(NodeId src, NodeId dst) {
  const Route* r = topology_.route(src, dst);
  if (!r) return std::nullopt;
  return cost_model::Path{topology_.bottleneck(*r), r->latency.to_seconds()};
}

bool NetworkFabric::reachable(NodeId src, NodeId dst) {
  return topology_.route(src, dst) != nullptr;
}

BitsPerSecond NetworkFabric::available_bandwidth(NodeId src, NodeId dst) {
  const Route* r = topology_.route(src, dst);
  if (!r) return BitsPerSecond{0};
  // Besides the flows in the sharing: those still paying their latency, and those sent this
  // instant that have yet to start (a burst of moves planned at one instant sees itself).
  if (starting_at_ != network_->simulator().now().ns) starting_.clear();
  std::erase_if(starting_, [&](const Starting& s) { return !network_->pending(s.id); });
  const std::vector<Hop> hops = r->hops;  // route() below may replace the cached route
  std::vector<std::size_t> starting(hops.size(), 0);
  for (const Starting& s : starting_) {
    const Route* other = topology_.route(s.src, s.dst);
    if (!other) continue;
    for (std::size_t k = 0; k < hops.size(); ++k) {
      for (const Hop& o : other->hops) {  // by channel: a half-duplex link's two ways share one
        starting[k] += topology_.channel(o) == topology_.channel(hops[k]);
      }
    }
  }
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < hops.size(); ++k) {
    const ChannelStats s = network_->channel_stats(hops[k].link, hops[k].forward);
    const std::size_t sharing = s.active_flows + s.joining_flows + starting[k];
    best = std::min(best, s.capacity_bps / static_cast<double>(sharing + 1));
  }
  return BitsPerSecond{best};
}

void NetworkFabric::fail_node(NodeId node) { network_->fail_node(node); }
void NetworkFabric::repair_node(NodeId node) { network_->repair_node(node); }

LinkId NetworkFabric::link_id(const std::string& name) const {
  const std::optional<LinkId> id = topology_.find_link(name);
  if (!id) throw std::logic_error("unknown link " + name);
  return *id;
}

void NetworkFabric::degrade_link(const std::string& link, std::optional<BitsPerSecond> bandwidth,
                                 std::optional<SimTime> latency) {
  // A latency change reaches transfers routed after it; running ones keep their route.
  const LinkId id = link_id(link);
  if (bandwidth) network_->set_link_bandwidth(id, *bandwidth);
  if (latency) network_->set_link_latency(id, *latency);
}

void NetworkFabric::fail_link(const std::string& link) { network_->fail_link(link_id(link)); }

void NetworkFabric::repair_link(const std::string& link) {
  const LinkId id = link_id(link);
  network_->repair_link(id);
  // A repair restores the link as declared.
  network_->set_link_bandwidth(id, topology_.link(id).bandwidth);
  network_->set_link_latency(id, topology_.link(id).latency);
}

const std::vector<LinkCounter>& NetworkFabric::link_counters() {
  if (counters_.empty()) {
    for (LinkId l = 0; l < topology_.link_count(); ++l) {
      const ClusterLink& link = topology_.link(l);
      const std::string a = topology_.node(link.a).name, b = topology_.node(link.b).name;
      counters_.push_back({a + "->" + b});
      if (link.duplex == Duplex::kFull) counters_.push_back({b + "->" + a});
    }
  }
  std::size_t i = 0;
  for (LinkId l = 0; l < topology_.link_count(); ++l) {
    const bool both = topology_.link(l).duplex == Duplex::kFull;
    for (const bool forward : {true, false}) {
      if (!forward && !both) continue;
      const ChannelStats c = network_->channel_stats(l, forward);
      LinkCounter& out = counters_[i++];
      out.capacity_bps = c.capacity_bps;
      out.allocated_bps = c.allocated_bps;
      out.bytes = std::llround(c.bytes);
    }
  }
  return counters_;
}

}  // namespace kvshift::sim
