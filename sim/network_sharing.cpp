// Max-min fair sharing by progressive filling, restricted to the connected
// component (flows <-> channels) that changed since the last computation.
//
// Progressive filling raises every unfixed flow's rate together; the next
// constraint to bind is either the channel with the smallest fair share
// (remaining capacity / unfixed flows) or the smallest per-flow cap. Its flows
// are fixed at that rate and removed from their other channels. Fixing flows
// at a rate r no greater than a channel's share never lowers that channel's
// share, so a lazy min-heap (stale entries skipped by version) finds the next
// bottleneck in O(log C). One computation costs O((F·h + C) log C) for F flows
// of h hops over C channels in the component.
#include <algorithm>
#include <cmath>

#include "sim/network.hpp"

namespace kvshift::sim {
namespace {

struct HeapLater {
  template <class T>
  bool operator()(const T& a, const T& b) const {
    return a.share > b.share || (a.share == b.share && a.channel > b.channel);
  }
};

}  // namespace

void Network::mark_dirty(std::uint32_t channel) { dirty_.push_back(channel); }

void Network::request_reshare() {
  if (reshare_pending_ || dirty_.empty()) return;
  reshare_pending_ = true;
  // Runs after every event already scheduled for this instant, so simultaneous
  // arrivals and departures are shared out once.
  sim_.schedule_after(SimTime{0}, [this] { reshare(); });
}

void Network::reshare() {
  reshare_pending_ = false;
  if (dirty_.empty()) return;
  ++reshares_;
  collect_component();
  dirty_.clear();
  reshared_flows_ += comp_flows_.size();
  for (const TransferId id : comp_flows_) settle(flows_[id]);
  progressive_filling();
  apply_rates();
}

void Network::collect_component() {
  ++epoch_;
  comp_channels_.clear();
  comp_flows_.clear();
  for (const std::uint32_t c : dirty_) {
    if (channels_[c].mark != epoch_) {
      channels_[c].mark = epoch_;
      comp_channels_.push_back(c);
    }
  }
  for (std::size_t i = 0; i < comp_channels_.size(); ++i) {
    for (const TransferId id : channels_[comp_channels_[i]].flows) {
      Flow& f = flows_[id];
      if (f.mark == epoch_) continue;
      f.mark = epoch_;
      comp_flows_.push_back(id);
      for (std::uint32_t k = 0; k < f.hop_count; ++k) {
        const std::uint32_t c = hop_arena_[f.hop_begin + k];
        if (channels_[c].mark != epoch_) {
          channels_[c].mark = epoch_;
          comp_channels_.push_back(c);
        }
      }
    }
  }
}

void Network::fix_flow(Flow& f, double rate) {
  f.fixed = true;
  f.new_rate = rate;
  for (std::uint32_t k = 0; k < f.hop_count; ++k) {
    const std::uint32_t c = hop_arena_[f.hop_begin + k];
    Channel& ch = channels_[c];
    ch.rem -= rate;
    --ch.count;
    if (ch.touched != round_) {
      ch.touched = round_;
      touched_.push_back(c);
    }
  }
}

void Network::end_round() {
  // One heap update per channel whose share moved in this round (shares only grow,
  // so the old entries are merely stale and are skipped by version).
  for (const std::uint32_t c : touched_) {
    Channel& ch = channels_[c];
    ++ch.version;
    if (ch.count > 0) {
      heap_.push_back({std::max(ch.rem, 0.0) / ch.count, c, ch.version});
      std::push_heap(heap_.begin(), heap_.end(), HeapLater{});
    }
  }
  touched_.clear();
  ++round_;
}

void Network::progressive_filling() {
  heap_.clear();
  capped_.clear();
  for (const std::uint32_t c : comp_channels_) {
    Channel& ch = channels_[c];
    ch.rem = ch.capacity;
    ch.count = static_cast<std::uint32_t>(ch.flows.size());
    ch.version = 0;
    if (ch.count > 0) heap_.push_back({ch.rem / ch.count, c, 0});
  }
  std::make_heap(heap_.begin(), heap_.end(), HeapLater{});
  for (const TransferId id : comp_flows_) {
    Flow& f = flows_[id];
    f.fixed = false;
    if (std::isfinite(f.cap_bps)) capped_.push_back({f.cap_bps, id});
  }
  std::sort(capped_.begin(), capped_.end());
  std::size_t next_cap = 0;
  std::size_t unfixed = comp_flows_.size();
  while (unfixed > 0) {
    while (!heap_.empty() && heap_.front().version != channels_[heap_.front().channel].version) {
      std::pop_heap(heap_.begin(), heap_.end(), HeapLater{});
      heap_.pop_back();
    }
    while (next_cap < capped_.size() && flows_[capped_[next_cap].second].fixed) ++next_cap;
    const double share = heap_.empty() ? INFINITY : heap_.front().share;
    if (next_cap < capped_.size() && capped_[next_cap].first <= share) {
      fix_flow(flows_[capped_[next_cap].second], capped_[next_cap].first);
      end_round();
      --unfixed;
      continue;
    }
    if (heap_.empty()) break;  // unreachable: every flow crosses a channel of the component
    const std::uint32_t c = heap_.front().channel;
    std::pop_heap(heap_.begin(), heap_.end(), HeapLater{});
    heap_.pop_back();
    for (const TransferId id : channels_[c].flows) {
      Flow& f = flows_[id];
      if (f.fixed) continue;
      fix_flow(f, share);
      --unfixed;
    }
    end_round();
  }
}

void Network::apply_rates() {
  for (const std::uint32_t c : comp_channels_) channels_[c].rem = 0;  // reused as the new sum
  for (const TransferId id : comp_flows_) {
    Flow& f = flows_[id];
    for (std::uint32_t k = 0; k < f.hop_count; ++k) channels_[hop_arena_[f.hop_begin + k]].rem += f.new_rate;
    if (f.new_rate != f.rate || !f.event.valid()) {
      f.rate = f.new_rate;
      f.info.rate_bps = f.rate;
      schedule_completion(f);
    }
  }
  const SimTime now = sim_.now();
  for (const std::uint32_t c : comp_channels_) {
    Channel& ch = channels_[c];
    if (ch.rem == ch.allocated) continue;
    ch.allocated = ch.rem;
    if (!options_.record_utilisation) continue;
    if (!ch.timeline.empty() && ch.timeline.back().time == now) {
      ch.timeline.back().rate_bps = ch.allocated;
    } else {
      ch.timeline.push_back({now, ch.allocated});
    }
  }
}

void Network::schedule_completion(Flow& f) {
  sim_.cancel(f.event);
  f.event = {};
  if (!(f.rate > 0)) return;  // no capacity now (cannot happen with positive bandwidths)
  const double ns = f.remaining_bits > 0 ? f.remaining_bits / f.rate * 1e9 : 0.0;
  const SimTime delay = ns < 9e18 ? SimTime{std::llround(ns)} : SimTime::max() - sim_.now();
  const TransferId id = f.info.id;
  f.event = sim_.schedule_after(delay, [this, id] { complete(id); });
}

}  // namespace kvshift::sim
