// Run-time changes of the network: link bandwidth changes, link and node
// failures and repairs, and what they do to transfers (re-route, stall, fail;
// see network.hpp for the rules).
#include <vector>

#include "sim/network.hpp"

namespace kvshift::sim {

void Network::set_link_bandwidth(LinkId link, BitsPerSecond bw) {
  topo_.set_link_bandwidth(link, bw);
  for (const std::uint32_t c : {2 * link, 2 * link + 1}) {
    channels_[c].capacity = bw.value;
    mark_dirty(c);
  }
  change_level_ = 0;  // every rate on these channels may move
  request_reshare();
}

void Network::set_link_latency(LinkId link, SimTime latency) {
  topo_.set_link_latency(link, latency);
}

void Network::fail_link(LinkId link) {
  topo_.set_link_up(link, false);
  on_route_change(link, std::nullopt);
}

void Network::repair_link(LinkId link) {
  topo_.set_link_up(link, true);
  on_route_change(std::nullopt, std::nullopt);
}

void Network::fail_node(NodeId node) {
  topo_.set_node_up(node, false);
  on_route_change(std::nullopt, node);
}

void Network::repair_node(NodeId node) {
  topo_.set_node_up(node, true);
  on_route_change(std::nullopt, std::nullopt);
}

void Network::on_route_change(std::optional<LinkId> link, std::optional<NodeId> node) {
  // Ends and re-routes edit running_; a record an end frees is reused only by a transfer
  // that has not started yet, which the state check below skips.
  const std::vector<FlowRecord> affected = running_;
  for (const FlowRecord fr : affected) {
    Flow& f = flows_[fr];
    if (f.info.state != TransferState::kRunning) continue;
    if (node && (f.info.src == *node || f.info.dst == *node)) {
      end(f, TransferState::kFailed, "node " + topo_.node(*node).name + " failed");
      continue;
    }
    if (f.info.phase == TransferPhase::kStalled) {
      try_route(fr, false);
      continue;
    }
    if (route_usable(f)) continue;
    settle(f.slot);
    leave_latency(f);
    leave_sharing(f);
    sim_.cancel(hot_[f.slot].event);
    hot_[f.slot].event = {};
    try_route(fr, true);
    if (f.info.phase == TransferPhase::kStalled && link) {
      f.info.reason = "link " + topo_.link(*link).name + " failed; " + f.info.reason;
    }
  }
  request_reshare();
}

}  // namespace kvshift::sim
