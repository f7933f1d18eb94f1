// Max-min fair sharing by progressive filling, restricted to the connected
// component (flows <-> channels) that changed since the last computation, and
// in it to the flows whose rate can move.
//
// Partial refill. Let x be the lowest of: the old rate of every flow that left,
// a lower bound on the new rate of every flow that joined (its cap, and C/n on
// each of its channels: max-min gives every flow at least its bottleneck's
// equal share), 0 when a capacity changed. Up to level x, progressive filling
// of the old and of the new flow set fix the same flows at the same rates (a
// channel saturating below x carries neither a leaver nor a joiner), so every
// flow slower than x keeps its rate: it only takes its rate off its channels'
// capacity. The component is searched from the changed channels through the
// other flows only, and only they are refilled.
//
// Progressive filling raises every unfixed flow's rate together; the next
// constraint to bind is either the channel with the smallest fair share
// (remaining capacity / unfixed flows) or the smallest per-flow cap. Its flows
// are fixed at that rate and removed from their other channels. Fixing flows
// at a rate r no greater than a channel's share never lowers that channel's
// share, so a min-heap with lazy keys finds the next bottleneck: a stale entry
// is re-keyed only when it reaches the top. One computation costs
// O(F·h + (C + R) log C) for F refilled flows of h hops over C channels, R
// being the re-keyed entries (at most one per bottleneck round and channel, far
// fewer in practice), plus one look at each kept flow of those channels.
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
  // At the end of the instant, so everything that joins or leaves at one time is
  // shared out once (and no event is spent on it).
  sim_.at_instant_end([this] { reshare(); });
}

void Network::reshare() {
  reshare_pending_ = false;
  if (dirty_.empty()) return;
  ++reshares_;
  collect_component(refill_level());
  dirty_.clear();
  joined_.clear();
  change_level_ = std::numeric_limits<double>::infinity();
  reshared_flows_ += comp_flows_.size();
  progressive_filling();
  apply_rates();
}

double Network::refill_level() {
  double level = change_level_;
  for (const std::uint32_t slot : joined_) {
    const Hot& h = hot_[slot];
    if (!h.sharing) continue;  // left again (its record may be reused by a later joiner)
    level = std::min(level, h.cap_bps);
    const std::uint32_t* hop = &hop_arena_[h.hop_begin];
    for (std::uint32_t k = 0; k < h.hop_count; ++k) {
      const Channel& ch = channels_[hop[k]];
      level = std::min(level, ch.capacity / static_cast<double>(ch.flows.size()));
    }
  }
  // Flows within rounding noise of the level are refilled too.
  return level * (1 - 1e-9);
}

void Network::collect_component(double level) {
  epoch_ += 2;
  comp_channels_.clear();
  comp_flows_.clear();
  auto reach = [this](std::uint32_t c) {
    Channel& ch = channels_[c];
    if (ch.mark == epoch_) return;
    ch.mark = epoch_;
    comp_channels_.push_back(c);
  };
  for (const std::uint32_t c : dirty_) reach(c);
  for (std::size_t i = 0; i < comp_channels_.size(); ++i) {
    const std::uint32_t c = comp_channels_[i];
    double kept = 0, demand = 0;
    std::uint32_t count = 0;
    for (const std::uint32_t slot : channels_[c].flows) {
      // A flow below the level keeps its rate (a joiner has none yet: refilled).
      const double rate = rates_[slot];
      if (rate > 0 && rate < level) {
        kept += rate;
        continue;
      }
      ++count;
      Hot& h = hot_[slot];
      if (marks_[slot] != epoch_) {
        marks_[slot] = epoch_;
        comp_flows_.push_back(slot);
        const std::uint32_t* hop = &hop_arena_[h.hop_begin];
        // The most this flow could ever get: its cap and every channel's capacity.
        h.ub = h.cap_bps;
        for (std::uint32_t k = 0; k < h.hop_count; ++k) {
          h.ub = std::min(h.ub, channels_[hop[k]].capacity);
          reach(hop[k]);
        }
      }
      demand += h.ub;
    }
    Channel& ch = channels_[c];
    ch.rem = ch.capacity - kept;
    ch.demand = demand;
    ch.count = count;
  }
}

void Network::fix_flow(std::uint32_t slot, double rate) {
  Hot& h = hot_[slot];
  marks_[slot] = epoch_ + 1;
  h.new_rate = rate;
  const std::uint32_t* hop = &hop_arena_[h.hop_begin];
  for (std::uint32_t k = 0; k < h.hop_count; ++k) {
    Channel& ch = channels_[hop[k]];
    ch.rem -= rate;
    --ch.count;
    ++ch.version;
  }
}

void Network::progressive_filling() {
  heap_.clear();
  capped_.clear();
  // A channel whose refilled flows could not fill what the kept ones leave even at
  // their individual maxima (demand <= rem) never binds: it stays out of the heap, and only its
  // capacity as a single-flow bound matters, folded into the flows' caps below.
  for (const std::uint32_t c : comp_channels_) {
    Channel& ch = channels_[c];
    ch.version = 0;
    ch.binding = ch.count > 0 && ch.demand > ch.rem;
    if (ch.binding) heap_.push_back({std::max(ch.rem, 0.0) / ch.count, c, 0});
  }
  std::make_heap(heap_.begin(), heap_.end(), HeapLater{});
  for (const std::uint32_t slot : comp_flows_) {
    Hot& h = hot_[slot];
    double bound = h.cap_bps, binding_min = INFINITY;
    const std::uint32_t* hop = &hop_arena_[h.hop_begin];
    for (std::uint32_t k = 0; k < h.hop_count; ++k) {
      const Channel& ch = channels_[hop[k]];
      if (ch.binding) {
        binding_min = std::min(binding_min, ch.capacity);
      } else {
        bound = std::min(bound, ch.capacity);
      }
    }
    // Needed only where a binding channel does not already imply it.
    if (bound < binding_min) capped_.push_back({bound, slot});
  }
  std::sort(capped_.begin(), capped_.end());
  std::size_t next_cap = 0;
  std::size_t unfixed = comp_flows_.size();
  while (unfixed > 0) {
    // Lazy keys: fixing flows only raises a channel's share, so an entry whose
    // channel changed since it was pushed is re-pushed with its current share when
    // it reaches the top; the first fresh entry is the true minimum.
    while (!heap_.empty()) {
      const HeapItem top = heap_.front();
      const Channel& ch = channels_[top.channel];
      if (top.version == ch.version) break;
      std::pop_heap(heap_.begin(), heap_.end(), HeapLater{});
      if (ch.count > 0) {
        heap_.back() = {std::max(ch.rem, 0.0) / ch.count, top.channel, ch.version};
        std::push_heap(heap_.begin(), heap_.end(), HeapLater{});
      } else {
        heap_.pop_back();
      }
    }
    while (next_cap < capped_.size() && marks_[capped_[next_cap].second] != epoch_) {
      ++next_cap;
    }
    const double share = heap_.empty() ? INFINITY : heap_.front().share;
    if (next_cap < capped_.size() && capped_[next_cap].first <= share) {
      fix_flow(capped_[next_cap].second, capped_[next_cap].first);
      --unfixed;
      continue;
    }
    if (heap_.empty()) break;  // unreachable: every flow crosses a channel of the component
    const std::uint32_t c = heap_.front().channel;
    std::pop_heap(heap_.begin(), heap_.end(), HeapLater{});
    heap_.pop_back();
    for (const std::uint32_t slot : channels_[c].flows) {
      if (marks_[slot] != epoch_) continue;  // kept, or fixed already
      fix_flow(slot, share);
      --unfixed;
    }
  }
}

void Network::apply_rates() {
  for (const std::uint32_t slot : comp_flows_) {
    Hot& h = hot_[slot];
    // Rates equal up to rounding noise of the filling order (1e-12 relative) are
    // kept, so the flow keeps its completion event.
    double& rate = rates_[slot];
    if (std::abs(h.new_rate - rate) > 1e-12 * rate || h.heap_pos == kNoSlot) {
      settle(slot);  // at the old rate, up to now
      rate = h.new_rate;
      Flow& f = flows_[h.flow];
      f.info.rate_bps = rate;
      schedule_completion(f);
    }
  }
  arm_tick();
  const SimTime now = sim_.now();
  for (const std::uint32_t c : comp_channels_) {
    Channel& ch = channels_[c];
    // Every kept flow's rate and every refilled flow's new rate was taken off each
    // of its channels, so what is left of the capacity gives the allocation.
    const double allocated = ch.capacity - std::max(ch.rem, 0.0);
    if (allocated == ch.allocated) continue;
    ch.allocated = allocated;
    if (!options_.record_utilisation) continue;
    auto& timeline = timelines_[c];
    if (!timeline.empty() && timeline.back().time == now) {
      timeline.back().rate_bps = ch.allocated;
    } else {
      timeline.push_back({now, ch.allocated});
    }
  }
}

}  // namespace kvshift::sim
