// Network: the flow-level model of a cluster's links. Each transfer is a flow
// along a route; at every instant the capacity of every link direction
// ("channel": one per direction of a full-duplex link, one shared by both
// directions of a half-duplex link) is shared by max-min fairness among the
// flows crossing it (progressive filling), each flow optionally capped by its
// own rate limit (a NIC, a PCIe hop).
//
// Timing. A transfer of S bytes submitted for time t first pays its route's
// latency as a pure delay (no bandwidth used), then joins the sharing. Rates
// are recomputed only when a flow joins or leaves or a link changes, only for
// the connected component (flows <-> channels) that the change touches, and in
// it only for flows at or above the change's level: a flow leaving at rate r or
// joining at a rate >= r (bounded below by its cap and each channel's equal
// share) leaves every flow slower than r as it was (progressive filling below
// level r sees the same constraints), so those keep their rates and only take
// their share off their channels (network_sharing.cpp). Flows whose rate did
// not change keep their completion time. Completion times are rounded once to
// the nearest ns when a rate is set, so on an idle path
//   finish = t + latency(route) + round(8·S / bottleneck)
// where latency(route) is the sum of the links' latencies, each already a whole
// number of ns. This is within 1 ns of round(cost_model::transfer_time(S, path)).
// The sharing flows wait in one heap by completion time, served by one pending
// simulator event for the whole network (network_completions.cpp); flows due
// at the same ns complete in transfer-id order. A completed flow's delivered
// bytes are exactly S (the rounding is absorbed there, at most half a ns of
// transmission).
//
// Lifecycle: pending (submitted, start time not reached) -> running (latency,
// sharing, or stalled) -> finished | failed | cancelled, exactly once; every
// end calls the transfer's callback and the observers.
//
// Failures (choice, documented for users): a transfer whose source and
// destination are not connected when it starts, or whose route loses a link or
// node, STALLS: it stays running with `stalled` set and a recorded reason
// ("no route from A to B"), and resumes (paying the new route's latency again)
// when a repair connects its ends. A routed transfer that loses a link is
// re-routed at once if another path exists (it keeps its delivered bytes and
// pays the new route's latency before rejoining the sharing). A transfer with
// an explicit route is never re-routed: it stalls until that route is usable.
// If its source or destination node fails, a transfer FAILS ("node X failed";
// "node X is down" when it was already down at the transfer's start).
// Change link and node state through the Network (set_link_bandwidth,
// fail_link, ...), not on the Topology directly, so flows hear about it.
// A simulation whose remaining transfers are stalled simply runs out of events.
//
// Routing: the topology's single shortest path, or with NetworkOptions::ecmp one
// of the equal-cost shortest paths per transfer (a seeded hash of its id, so a
// transfer keeps its path across re-routes that leave it available and a rerun
// takes the same paths).
//
// Left out: packet-level effects (slow start, queues, losses), per-packet
// multipath, the TCP RTT bias of real max-min sharing, the reverse ACK traffic.
#pragma once

#include <array>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cost_model/units.hpp"
#include "sim/id_map.hpp"
#include "sim/simulator.hpp"
#include "sim/topology.hpp"

namespace kvshift::sim {

using TransferId = std::uint32_t;

enum class TransferState { kPending, kRunning, kFinished, kFailed, kCancelled };
/// "pending", "running", "finished", "failed", "cancelled".
std::string_view to_string(TransferState s);

/// What a running transfer is doing.
enum class TransferPhase { kNone, kLatency, kSharing, kStalled };

/// Public view of one transfer.
struct TransferInfo {
  TransferId id = 0;
  NodeId src = 0;
  NodeId dst = 0;
  Bytes size;
  TransferState state = TransferState::kPending;
  TransferPhase phase = TransferPhase::kNone;
  SimTime start;               ///< requested start
  SimTime finish;              ///< when it finished, failed or was cancelled
  double rate_bps = 0;         ///< current rate (sharing phase)
  double delivered_bytes = 0;  ///< settled at the last rate change (exactly `size` once finished)
  int reroutes = 0;            ///< times it was moved to another route
  std::string reason;          ///< why it stalled, failed or was cancelled (empty otherwise)
};

/// Called once when a transfer finishes, fails or is cancelled.
using TransferCallback = std::function<void(const TransferInfo&)>;

/// What to move, from where, to where, when.
struct TransferRequest {
  NodeId src = 0;
  NodeId dst = 0;
  Bytes size;
  SimTime start;                             ///< absolute; must be >= now()
  std::optional<std::vector<LinkId>> route;  ///< explicit links from src to dst (else routed)
  std::optional<BitsPerSecond> rate_cap;     ///< per-flow limit (> 0)
  TransferCallback on_done;                  ///< optional
};

/// Listens to transfer transitions (reports, traces, the layers above).
class NetworkObserver {
 public:
  virtual ~NetworkObserver() = default;
  /// The transfer's start time was reached (it now pays its latency).
  virtual void on_started(const TransferInfo&) {}
  /// It stalled (reason in info.reason) or was re-routed.
  virtual void on_stalled(const TransferInfo&) {}
  virtual void on_rerouted(const TransferInfo&) {}
  /// It reached finished, failed or cancelled.
  virtual void on_done(const TransferInfo&) {}
};

struct NetworkOptions {
  /// Keep each channel's allocated rate over time (for utilisation reports).
  bool record_utilisation = true;
  /// Routed transfers take one of the equal-cost shortest paths, picked per transfer by a
  /// hash of (ecmp_seed, transfer id) (Topology::ecmp_route); off: the lowest-id path.
  bool ecmp = false;
  std::uint64_t ecmp_seed = 0;
  /// Keep every ended transfer's TransferInfo, so info(id) answers after the end. Off, an
  /// ended transfer's record is reused (memory follows the transfers in flight, not all
  /// the run has had) and info(id) of it throws; cancel(id) of it returns false.
  bool keep_ended = true;
};

/// One point of a channel's utilisation timeline: from `time` on, `rate_bps` is allocated.
struct RateSample {
  SimTime time;
  double rate_bps = 0;
};

/// Per link direction (or the shared channel of a half-duplex link).
struct ChannelStats {
  double bytes = 0;                  ///< carried up to now
  double capacity_bps = 0;           ///< current
  std::size_t active_flows = 0;      ///< flows in the sharing now
  std::size_t joining_flows = 0;     ///< flows routed over it that join once their latency is paid
  double allocated_bps = 0;          ///< rate allocated to those flows now
  std::vector<RateSample> timeline;  ///< allocated rate changes (if recorded)
};

class Network {
 public:
  /// The network reads and changes `topology` (link/node state); both must outlive it.
  Network(Simulator& sim, Topology& topology, NetworkOptions options = {});
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  /// Queues a transfer; throws InputError for an unknown node, a negative size, a
  /// start before now(), a non-positive rate cap or an explicit route that is not a
  /// walk from src to dst.
  TransferId submit(TransferRequest request);
  /// Cancels a pending or running transfer; false if it had already ended.
  bool cancel(TransferId id, std::string reason = "cancelled");

  /// Throws std::out_of_range for an unknown id, or an ended one when !keep_ended.
  const TransferInfo& info(TransferId id) const { return flows_[record_of(id)].info; }
  /// Whether the transfer has yet to reach its start (false once started or ended).
  bool pending(TransferId id) const;
  /// Transfers submitted so far.
  std::size_t transfer_count() const { return next_id_; }
  /// Transfer records allocated (with !keep_ended: at most the most ever in flight at once).
  std::size_t records_held() const { return flows_.size(); }
  /// Route hops stored for the solver (bounded by the records ever running at once).
  std::size_t hops_held() const { return hop_arena_.size(); }
  /// Transfers that are pending or running.
  std::size_t active_count() const { return active_; }
  /// The route a running transfer follows (none when pending, stalled or ended), with the
  /// latency it had when the transfer took it.
  std::optional<Route> route_of(TransferId id) const;

  // Run-time changes (call them from events to schedule them).
  /// Degrades or restores a link's bandwidth (> 0); rates are re-shared.
  void set_link_bandwidth(LinkId link, BitsPerSecond bw);
  /// Changes a link's one-way latency (>= 0). Transfers routed from now on (new ones and
  /// re-routes) see it and may take another path; running transfers keep their route.
  void set_link_latency(LinkId link, SimTime latency);
  /// Takes a link down: its flows are re-routed or stall.
  void fail_link(LinkId link);
  /// Brings a link back: stalled transfers retry their routes.
  void repair_link(LinkId link);
  /// Takes a node down: transfers from/to it fail, transfers through it re-route or stall.
  void fail_node(NodeId node);
  /// Brings a node back (transfers that failed stay failed).
  void repair_node(NodeId node);

  void add_observer(NetworkObserver* o) { observers_.push_back(o); }
  const Topology& topology() const { return topo_; }
  Simulator& simulator() { return sim_; }

  /// Stats of the channel that crossing `link` in direction `forward` uses.
  ChannelStats channel_stats(LinkId link, bool forward) const;
  /// Rate re-computations run so far (each covers one connected component).
  std::uint64_t reshare_count() const { return reshares_; }
  /// Flows refilled, summed over all re-computations (a cost measure for benchmarks).
  std::uint64_t reshared_flows() const { return reshared_flows_; }

 private:
  /// Everything about a transfer the solver does not touch.
  struct Flow {
    TransferInfo info;
    TransferCallback on_done;
    std::optional<Route> explicit_route;
    SimTime route_latency;  ///< of the route it follows (its channels: the Hot record's hops)
    EventId start_event;    ///< while pending
    double cap_bps = std::numeric_limits<double>::infinity();
    std::uint32_t slot = kNoSlot;  ///< its Hot record while running
    std::uint32_t running_index = 0;
  };
  /// Index of a Flow in flows_ (== its id while keep_ended; recycled otherwise).
  using FlowRecord = std::uint32_t;
  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};
  /// The solver's view of a running transfer (88 bytes). Records are recycled, so
  /// the running transfers stay in a small, cache-resident array however many
  /// transfers a run has had; channels list their flows by record index. What the
  /// component search reads of every flow it passes (its rate, its mark) lives in
  /// two dense arrays beside it (rates_, marks_), so the search stays in L1.
  struct Hot {
    EventId event;  ///< end of the latency phase
    TransferId id = 0;
    FlowRecord flow = 0;
    double cap_bps = std::numeric_limits<double>::infinity();
    double remaining_bits = 0;
    double route_bits = 0;             ///< remaining_bits when it joined the sharing on this route
    double new_rate = 0;               ///< solver scratch
    double ub = 0;                     ///< solver scratch: min(cap, capacities of its channels)
    std::int64_t last_settle = 0;      ///< ns
    std::int64_t due = 0;              ///< ns: completion at the current rate
    std::uint32_t heap_pos = kNoSlot;  ///< its place in due_heap_ (kNoSlot: not there)
    std::uint32_t hop_begin = 0;       ///< channels of the route in hop_arena_
    std::uint16_t hop_count = 0;
    std::uint8_t sharing = 0;  ///< in the sharing phase
  };
  /// Everything a join, a leave and the solver read of a channel, in one 128-byte
  /// record: a fleet run's flows each cross a few of tens of thousands of channels, and
  /// a record the hardware fetches as one aligned pair of lines costs one miss per hop
  /// where three arrays cost three.
  struct alignas(128) Channel {
    /// Hot records in the sharing; a few inline (a host's link carries a flow or two).
    boost::container::small_vector<std::uint32_t, 4> flows;
    double capacity = 0;
    double allocated = 0;
    double bits = 0;            ///< carried by the flows that left it (those in it: their Hot)
    double rem = 0;             ///< solver scratch
    double demand = 0;          ///< solver scratch: sum of its refilled flows' maxima
    std::uint64_t mark = 0;     ///< component search epoch
    std::uint32_t count = 0;    ///< solver scratch: its refilled flows not yet fixed
    std::uint32_t version = 0;  ///< solver scratch
    std::uint32_t joining = 0;  ///< flows routed over it still paying their latency
    bool binding = false;       ///< solver scratch: can be saturated
  };
  static_assert(sizeof(Channel) == 128);
  struct HeapItem {
    double share;
    std::uint32_t channel;
    std::uint32_t version;
  };

  /// The record of a transfer; nullopt when it ended and was forgotten (!keep_ended).
  /// std::out_of_range for an id never submitted.
  std::optional<FlowRecord> find_record(TransferId id) const;
  /// The same, std::out_of_range for a forgotten one too.
  FlowRecord record_of(TransferId id) const;
  void start(FlowRecord fr);
  void begin_route(FlowRecord fr, const Route& r);
  /// Takes the route whose channels are `channels`: its latency first, then the sharing.
  void begin_channels(FlowRecord fr, std::span<const std::uint32_t> channels, SimTime latency);
  /// Whether every link of the running transfer's route is usable (and its ends are up).
  bool route_usable(const Flow& f) const;
  void enter_sharing(FlowRecord fr);
  void complete(FlowRecord fr);
  void leave_sharing(Flow& f);
  /// A flow in its latency phase stops counting as joining its channels (it joins, ends or is
  /// re-routed).
  void leave_latency(Flow& f);
  void settle(std::uint32_t slot);
  void end(Flow& f, TransferState s, std::string reason);
  void stall(Flow& f, std::string reason);
  void try_route(FlowRecord fr, bool rerouting);
  void mark_dirty(std::uint32_t channel);
  void request_reshare();
  void reshare();
  double refill_level();
  void collect_component(double level);
  void progressive_filling();
  void fix_flow(std::uint32_t slot, double rate);
  void apply_rates();
  void schedule_completion(Flow& f);
  bool due_before(std::uint32_t a, std::uint32_t b) const;
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void heap_update(std::uint32_t slot);
  void heap_remove(std::uint32_t slot);
  void arm_tick();
  void tick();
  void on_route_change(std::optional<LinkId> link, std::optional<NodeId> node);
  void notify(void (NetworkObserver::*fn)(const TransferInfo&), const Flow& f);

  Simulator& sim_;
  Topology& topo_;
  NetworkOptions options_;
  std::deque<Flow> flows_;  // stable addresses: callbacks may submit more transfers
  TransferId next_id_ = 0;
  std::vector<FlowRecord> free_flows_;  ///< ended records (!keep_ended)
  IdMap records_;                       ///< id -> record (!keep_ended)
  std::vector<Hot> hot_;
  std::vector<double> rates_;         ///< per Hot record: current rate (0 outside the sharing)
  std::vector<std::uint64_t> marks_;  ///< per Hot record: epoch_ refilled, epoch_ + 1 fixed
  std::vector<Channel> channels_;
  std::vector<std::uint32_t> free_hot_;  ///< recycled Hot records
  /// Per channel: its allocated rate over time (NetworkOptions::record_utilisation).
  std::vector<std::vector<RateSample>> timelines_;
  std::vector<NetworkObserver*> observers_;
  /// Channels of each Hot record's route, in a region of the arena that the record keeps
  /// when it is recycled (grown only for a longer route), so the arena stays bounded.
  std::vector<std::uint32_t> hop_arena_;
  std::vector<std::uint32_t> pos_arena_;  ///< each hop's index in its channel's flow list
  std::vector<std::uint32_t> region_begin_, region_size_;  ///< per Hot record
  std::vector<std::uint32_t> dirty_;   ///< channels touched since the last reshare
  std::vector<std::uint32_t> joined_;  ///< Hot records that joined since then
  /// Lowest rate a change since the last reshare can move (0: recompute all of it).
  double change_level_ = std::numeric_limits<double>::infinity();
  std::vector<FlowRecord> running_;  ///< running transfers (any phase), unordered
  /// Per source, the channels of the pair it last routed: a source mostly sends to one
  /// place (a GPU streams to its replica node), and one cache line by index spares a fleet
  /// run a route lookup and a copy of the route per transfer. Valid while `version` is the
  /// topology's routing version.
  static constexpr std::size_t kMemoHops = 8;
  struct alignas(64) RouteMemo {
    std::uint64_t version = ~std::uint64_t{0};
    NodeId dst = 0;
    std::uint32_t hops = 0;
    SimTime latency;
    std::array<std::uint32_t, kMemoHops> channels{};
  };
  std::vector<RouteMemo> route_memo_;
  std::vector<std::uint32_t> route_channels_;  ///< begin_route's scratch
  /// The memo of src's shortest route to dst, filled on a miss; nullptr when there is no
  /// route or it is longer than kMemoHops.
  const RouteMemo* memo_route(NodeId src, NodeId dst);
  // solver scratch, kept between calls so a reshare allocates nothing once warm
  std::vector<std::uint32_t> comp_channels_;
  std::vector<std::uint32_t> comp_flows_;  ///< Hot records to refill
  std::vector<std::pair<double, std::uint32_t>> capped_;
  std::vector<HeapItem> heap_;
  /// Sharing flows by completion time (ties by id): the network's one pending completion
  /// event (tick_, at tick_at_ <= the first due) serves them all (network_completions.cpp).
  std::vector<std::uint32_t> due_heap_;
  EventId tick_;
  std::int64_t tick_at_ = 0;
  std::uint64_t epoch_ = 0;  ///< +2 per reshare
  std::size_t active_ = 0;
  bool reshare_pending_ = false;
  std::uint64_t reshares_ = 0;
  std::uint64_t reshared_flows_ = 0;
};

}  // namespace kvshift::sim
