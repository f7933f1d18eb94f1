// Network: transfer lifecycle, run-time link/node changes and the bookkeeping
// around the max-min solver (network_sharing.cpp).
#include "sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cost_model/input_error.hpp"

namespace kvshift::sim {

std::string_view to_string(TransferState s) {
  switch (s) {
    case TransferState::kPending:
      return "pending";
    case TransferState::kRunning:
      return "running";
    case TransferState::kFinished:
      return "finished";
    case TransferState::kFailed:
      return "failed";
    case TransferState::kCancelled:
      return "cancelled";
  }
  return "?";
}

Network::Network(Simulator& sim, Topology& topology, NetworkOptions options)
    : sim_(sim), topo_(topology), options_(options) {
  channels_.resize(2 * topo_.link_count());
  timelines_.resize(channels_.size());
  for (LinkId l = 0; l < topo_.link_count(); ++l) {
    channels_[2 * l].capacity = topo_.bandwidth(l).value;
    channels_[2 * l + 1].capacity = topo_.bandwidth(l).value;
  }
}

Network::~Network() = default;

TransferId Network::submit(TransferRequest r) {
  if (r.src >= topo_.node_count() || r.dst >= topo_.node_count()) {
    throw InputError("transfer: unknown node id");
  }
  if (topo_.link_count() * 2 != channels_.size()) {
    throw std::logic_error("Network: links were added to the topology after the network was built");
  }
  if (r.size.count < 0) throw InputError("transfer: bytes must be >= 0");
  if (r.start < sim_.now()) throw InputError("transfer: start is before the current time");
  if (r.rate_cap && !(r.rate_cap->value > 0)) throw InputError("transfer: rate cap must be > 0");
  std::optional<Route> explicit_route;
  if (r.route) {
    for (const LinkId l : *r.route) {
      if (l >= topo_.link_count()) throw InputError("transfer: route names an unknown link id");
    }
    explicit_route = topo_.make_route(r.src, r.dst, *r.route);
    std::vector<LinkId> seen = *r.route;
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
      throw InputError("transfer: route uses a link twice");
    }
  }
  const TransferId id = next_id_++;
  FlowRecord fr = static_cast<FlowRecord>(flows_.size());
  if (!options_.keep_ended && !free_flows_.empty()) {
    fr = free_flows_.back();
    free_flows_.pop_back();
    flows_[fr] = Flow{};
  } else {
    flows_.emplace_back();
  }
  if (!options_.keep_ended) records_.insert(id, fr);
  Flow& f = flows_[fr];
  f.explicit_route = std::move(explicit_route);
  f.info.id = id;
  f.info.src = r.src;
  f.info.dst = r.dst;
  f.info.size = r.size;
  f.info.start = r.start;
  f.on_done = std::move(r.on_done);
  if (r.rate_cap) f.cap_bps = r.rate_cap->value;
  ++active_;
  f.start_event = sim_.schedule_at(r.start, [this, fr] { start(fr); });
  // Its start will read the source's route memo: fetch that line while events run before it.
  if (r.src < route_memo_.size()) __builtin_prefetch(&route_memo_[r.src]);
  return id;
}

std::optional<Network::FlowRecord> Network::find_record(TransferId id) const {
  if (id >= next_id_) throw std::out_of_range("transfer " + std::to_string(id) + ": unknown");
  if (options_.keep_ended) return id;
  return records_.find(id);
}

bool Network::pending(TransferId id) const {
  const std::optional<FlowRecord> fr = find_record(id);
  return fr && flows_[*fr].info.state == TransferState::kPending;
}

Network::FlowRecord Network::record_of(TransferId id) const {
  const std::optional<FlowRecord> fr = find_record(id);
  if (!fr) throw std::out_of_range("transfer " + std::to_string(id) + ": ended (not kept)");
  return *fr;
}

std::optional<Route> Network::route_of(TransferId id) const {
  const std::optional<FlowRecord> fr = find_record(id);
  if (!fr) return std::nullopt;  // ended and forgotten
  const Flow& f = flows_[*fr];
  const bool routed =
      f.info.state == TransferState::kRunning &&
      (f.info.phase == TransferPhase::kLatency || f.info.phase == TransferPhase::kSharing);
  if (!routed) return std::nullopt;
  // The hops from the channels: a channel names its link, and the walk from the source
  // says which way each is crossed.
  Route r{f.info.src, f.info.dst, {}, f.route_latency};
  const Hot& h = hot_[f.slot];
  NodeId at = f.info.src;
  for (std::uint32_t k = 0; k < h.hop_count; ++k) {
    const LinkId l = hop_arena_[h.hop_begin + k] / 2;
    const ClusterLink& link = topo_.link(l);
    r.hops.push_back({l, link.a == at});
    at = link.a == at ? link.b : link.a;
  }
  return r;
}

bool Network::route_usable(const Flow& f) const {
  if (!topo_.node_up(f.info.src) || !topo_.node_up(f.info.dst)) return false;
  const Hot& h = hot_[f.slot];
  for (std::uint32_t k = 0; k < h.hop_count; ++k) {
    if (!topo_.link_usable(hop_arena_[h.hop_begin + k] / 2)) return false;
  }
  return true;
}

void Network::notify(void (NetworkObserver::*fn)(const TransferInfo&), const Flow& f) {
  for (NetworkObserver* o : observers_) (o->*fn)(f.info);
}

void Network::start(FlowRecord fr) {
  Flow& f = flows_[fr];
  f.start_event = {};
  if (free_hot_.empty()) {
    f.slot = static_cast<std::uint32_t>(hot_.size());
    hot_.emplace_back();
    rates_.push_back(0);
    marks_.push_back(0);
    region_begin_.push_back(0);
    region_size_.push_back(0);
  } else {
    f.slot = free_hot_.back();
    free_hot_.pop_back();
    hot_[f.slot] = Hot{};
    rates_[f.slot] = 0;
  }
  Hot& h = hot_[f.slot];
  h.id = f.info.id;
  h.flow = fr;
  h.cap_bps = f.cap_bps;
  h.remaining_bits = f.info.size.bits();
  f.info.state = TransferState::kRunning;
  f.running_index = static_cast<std::uint32_t>(running_.size());
  running_.push_back(fr);
  notify(&NetworkObserver::on_started, f);
  for (const NodeId end_node : {f.info.src, f.info.dst}) {
    if (!topo_.node_up(end_node)) {
      end(f, TransferState::kFailed, "node " + topo_.node(end_node).name + " is down");
      return;
    }
  }
  try_route(fr, false);
}

void Network::try_route(FlowRecord fr, bool rerouting) {
  Flow& f = flows_[fr];
  const Route* r = nullptr;
  const RouteMemo* memo = nullptr;
  std::optional<Route> hashed;
  std::string why;
  if (f.explicit_route) {
    if (topo_.usable(*f.explicit_route)) {
      r = &*f.explicit_route;
    } else {
      why = "its explicit route from " + topo_.node(f.info.src).name + " to " +
            topo_.node(f.info.dst).name + " crosses a link or node that is down";
    }
  } else {
    if (options_.ecmp) {
      // splitmix64 in ecmp_route mixes this further; the odd multiplier keeps seeds apart.
      hashed = topo_.ecmp_route(f.info.src, f.info.dst,
                                (options_.ecmp_seed * 0x9e3779b97f4a7c15ULL) ^ f.info.id);
      if (hashed) r = &*hashed;
    } else if (!(memo = memo_route(f.info.src, f.info.dst))) {
      r = topo_.route(f.info.src, f.info.dst);
    }
    if (!r && !memo)
      why = "no route from " + topo_.node(f.info.src).name + " to " + topo_.node(f.info.dst).name;
  }
  if (memo) {
    begin_channels(fr, std::span(memo->channels).first(memo->hops), memo->latency);
  } else if (r) {
    begin_route(fr, *r);
  } else {
    stall(f, std::move(why));
    return;
  }
  if (rerouting) {
    ++f.info.reroutes;
    notify(&NetworkObserver::on_rerouted, f);
  }
}

const Network::RouteMemo* Network::memo_route(NodeId src, NodeId dst) {
  if (route_memo_.size() < topo_.node_count()) route_memo_.resize(topo_.node_count());
  RouteMemo& m = route_memo_[src];
  if (m.version == topo_.routing_version() && m.dst == dst) return &m;
  const Route* r = topo_.route(src, dst);
  if (!r || r->hops.size() > kMemoHops) return nullptr;  // the caller routes it unmemoised
  m.version = topo_.routing_version();
  m.dst = dst;
  m.hops = static_cast<std::uint32_t>(r->hops.size());
  m.latency = r->latency;
  for (std::size_t k = 0; k < r->hops.size(); ++k) m.channels[k] = topo_.channel(r->hops[k]);
  return &m;
}

void Network::begin_route(FlowRecord fr, const Route& r) {
  route_channels_.clear();
  for (const Hop& h : r.hops) route_channels_.push_back(topo_.channel(h));
  begin_channels(fr, route_channels_, r.latency);
}

void Network::begin_channels(FlowRecord fr, std::span<const std::uint32_t> channels,
                             SimTime latency) {
  Flow& f = flows_[fr];
  f.route_latency = latency;
  f.info.reason.clear();
  const auto hops = static_cast<std::uint32_t>(channels.size());
  if (region_size_[f.slot] < hops) {  // a longer route than this record had: a new region
    region_begin_[f.slot] = static_cast<std::uint32_t>(hop_arena_.size());
    region_size_[f.slot] = hops;
    hop_arena_.resize(hop_arena_.size() + hops);
    pos_arena_.resize(pos_arena_.size() + hops);
  }
  Hot& h = hot_[f.slot];
  h.hop_begin = region_begin_[f.slot];
  h.hop_count = static_cast<std::uint16_t>(hops);
  std::copy(channels.begin(), channels.end(), hop_arena_.begin() + h.hop_begin);
  // Counted as joining each channel, so a move planned meanwhile sees it coming; touching the
  // records also brings them in for the join after the latency (long cold in a large fabric).
  for (const std::uint32_t c : channels) ++channels_[c].joining;
  f.info.phase = TransferPhase::kLatency;
  h.event = sim_.schedule_after(latency, [this, fr] { enter_sharing(fr); });
}

void Network::leave_latency(Flow& f) {
  if (f.info.phase != TransferPhase::kLatency) return;
  const Hot& h = hot_[f.slot];
  for (std::uint32_t k = 0; k < h.hop_count; ++k) --channels_[hop_arena_[h.hop_begin + k]].joining;
  f.info.phase = TransferPhase::kNone;
}

void Network::enter_sharing(FlowRecord fr) {
  Flow& f = flows_[fr];
  Hot& h = hot_[f.slot];
  h.event = {};
  leave_latency(f);
  if (h.hop_count == 0 || h.remaining_bits <= 0) {
    complete(fr);
    return;
  }
  f.info.phase = TransferPhase::kSharing;
  joined_.push_back(f.slot);
  h.sharing = 1;
  rates_[f.slot] = 0;
  h.route_bits = h.remaining_bits;
  h.last_settle = sim_.now().ns;
  for (std::uint32_t k = 0; k < h.hop_count; ++k) {
    const std::uint32_t c = hop_arena_[h.hop_begin + k];
    auto& list = channels_[c].flows;
    pos_arena_[h.hop_begin + k] = static_cast<std::uint32_t>(list.size());
    list.push_back(f.slot);
    mark_dirty(c);
  }
  request_reshare();
}

void Network::settle(std::uint32_t slot) {
  Hot& h = hot_[slot];
  const std::int64_t now = sim_.now().ns;
  if (!h.sharing || now == h.last_settle) return;
  const double bits = rates_[slot] * static_cast<double>(now - h.last_settle) * 1e-9;
  h.remaining_bits -= bits;
  flows_[h.flow].info.delivered_bytes += bits / 8;
  h.last_settle = now;
}

void Network::leave_sharing(Flow& f) {
  if (f.info.phase != TransferPhase::kSharing) return;
  Hot& h = hot_[f.slot];
  for (std::uint32_t k = 0; k < h.hop_count; ++k) {
    const std::uint32_t c = hop_arena_[h.hop_begin + k];
    auto& list = channels_[c].flows;
    const std::uint32_t pos = pos_arena_[h.hop_begin + k];
    const std::uint32_t moved = list.back();
    list[pos] = moved;
    list.pop_back();
    if (moved != f.slot) {
      const Hot& g = hot_[moved];
      for (std::uint32_t j = 0; j < g.hop_count; ++j) {
        if (hop_arena_[g.hop_begin + j] == c) pos_arena_[g.hop_begin + j] = pos;
      }
    }
    mark_dirty(c);
    // Its channels carried what it delivered on this route (they count it from here).
    channels_[c].bits += h.route_bits - h.remaining_bits;
  }
  change_level_ = std::min(change_level_, rates_[f.slot]);
  rates_[f.slot] = 0;
  heap_remove(f.slot);
  h.sharing = 0;
  f.info.rate_bps = 0;
  f.info.phase = TransferPhase::kNone;
  request_reshare();
}

void Network::complete(FlowRecord fr) {
  Flow& f = flows_[fr];
  Hot& h = hot_[f.slot];
  h.event = {};
  settle(f.slot);
  // Whatever the ns rounding left over (a fraction of a ns of transmission) is
  // delivered now, so every channel on the route carried exactly `size` (leave_sharing
  // books it).
  h.remaining_bits = 0;
  f.info.delivered_bytes = static_cast<double>(f.info.size.count);
  end(f, TransferState::kFinished, "");
}

void Network::end(Flow& f, TransferState s, std::string reason) {
  if (f.info.state == TransferState::kRunning) {
    settle(f.slot);
    leave_latency(f);
    leave_sharing(f);
    const FlowRecord last = running_.back();
    running_[f.running_index] = last;
    flows_[last].running_index = f.running_index;
    running_.pop_back();
    sim_.cancel(hot_[f.slot].event);
    free_hot_.push_back(f.slot);
    f.slot = kNoSlot;
  } else {
    sim_.cancel(f.start_event);
    f.start_event = {};
  }
  f.info.state = s;
  f.info.phase = TransferPhase::kNone;
  f.info.finish = sim_.now();
  f.info.reason = std::move(reason);
  --active_;
  // An ended transfer keeps only its TransferInfo: long runs end millions of them.
  TransferCallback done = std::move(f.on_done);
  f.on_done = nullptr;
  f.explicit_route.reset();
  if (done) done(f.info);
  notify(&NetworkObserver::on_done, f);
  if (!options_.keep_ended) {  // only now: the callbacks above may have read `f`
    free_flows_.push_back(*records_.find(f.info.id));
    records_.erase(f.info.id);
  }
}

void Network::stall(Flow& f, std::string reason) {
  f.info.phase = TransferPhase::kStalled;
  f.info.reason = std::move(reason);
  notify(&NetworkObserver::on_stalled, f);
}

bool Network::cancel(TransferId id, std::string reason) {
  const std::optional<FlowRecord> fr = find_record(id);
  if (!fr) return false;  // ended and forgotten
  Flow& f = flows_[*fr];
  if (f.info.state != TransferState::kPending && f.info.state != TransferState::kRunning) {
    return false;
  }
  end(f, TransferState::kCancelled, std::move(reason));
  return true;
}

ChannelStats Network::channel_stats(LinkId link, bool forward) const {
  const std::uint32_t c = topo_.channel(Hop{link, forward});
  // Flows in the sharing book their bits on leaving; until then they count as settled, plus
  // what their rate has carried since (so the bytes are exact at this instant).
  const Channel& ch = channels_.at(c);
  const std::int64_t now = sim_.now().ns;
  double bits = ch.bits;
  for (const std::uint32_t slot : ch.flows) {
    const Hot& h = hot_[slot];
    bits += h.route_bits - h.remaining_bits;
    if (h.sharing) bits += rates_[slot] * static_cast<double>(now - h.last_settle) * 1e-9;
  }
  return {bits / 8, ch.capacity, ch.flows.size(), ch.joining, ch.allocated, timelines_[c]};
}

}  // namespace kvshift::sim
