// The replay coordinator: node processes, the trace, the events, the records.
#include "testbed/replay_run.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "sim/workload.hpp"
#include "testbed/cluster_links.hpp"
#include "testbed/replay_channel.hpp"
#include "testbed/replay_node.hpp"
#include "testbed/testbed_moves.hpp"

namespace kvshift::testbed {
namespace {

using cost_model::Strategy;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// A node's process: forked, then told to stop (or killed) and always reaped.
class NodeProcess {
 public:
  NodeProcess(const NodeConfig& config, const std::vector<int>& close_in_child) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::runtime_error("replay: socketpair failed");
    }
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::runtime_error("replay: fork failed");
    }
    if (pid_ == 0) {  // the node: dies with its coordinator, serves, exits without unwinding
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::close(fds[0]);
      for (int fd : close_in_child) ::close(fd);
      int rc = 1;
      try {
        rc = serve_node(config, fds[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "replay node %s: %s\n", config.name.c_str(), e.what());
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    ::close(fds[1]);
    channel_ = std::make_unique<Channel>(fds[0]);
  }
  ~NodeProcess() { kill(); }
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  Channel& channel() { return *channel_; }
  /// SIGKILL and reap (idempotent).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  /// Asks it to stop; reaps it, killing it after `grace`.
  void stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    channel_->send({{"op", "stop"}});
    for (auto deadline = Clock::now() + grace; Clock::now() < deadline;) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      ::usleep(10000);
    }
    kill();
  }

 private:
  pid_t pid_ = -1;
  std::unique_ptr<Channel> channel_;
};

enum class Phase { kPending, kQueued, kDecoding, kMoving, kDone };

struct Request {
  sim::RequestArrival arrival;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> generated;
  int node = -1;
  std::int64_t epoch = 0;
  Phase phase = Phase::kPending;
  int move = -1;  ///< its open move's index in the run's moves
  std::string first_node;
};

struct Node {
  std::string name;
  std::unique_ptr<NodeProcess> process;
  std::uint16_t port = 0;
  bool up = false, draining = false;
};

/// One move's bookkeeping beside its record.
struct OpenMove {
  int dst = -1;
  std::int64_t epoch = 0;            ///< the request's epoch while it moves
  std::int64_t stalled_since = 0;    ///< when the request stopped making progress
  bool on_wire = false;              ///< its bytes are still being sent
  std::int64_t source_wait_ns = -1;  ///< the source's wait for its step in flight
  bool counted = true;  ///< false: it turned out not to be a move (requeued before prefill)
};

class Replay {
 public:
  Replay(const input::ScenarioSpec& spec, const MoveSetup& setup,
         const cost_model::ComputeCosts& costs, const ReplayOptions& o, Strategy strategy,
         const std::function<void(const std::string&)>& progress)
      : spec_(spec),
        setup_(setup),
        costs_(costs),
        o_(o),
        strategy_(strategy),
        progress_(progress),
        links_(spec.cluster) {
    run_.strategy = strategy;
    run_.duration_ns = static_cast<std::int64_t>(spec.duration.value * 1e9);
  }

  ReplayRun run() {
    draw_requests();
    for (const std::string& name : gpu_names(spec_)) nodes_.push_back({name});
    for (std::size_t n = 0; n < nodes_.size(); ++n) start_node(static_cast<int>(n));
    t0_ = Clock::now();
    serve();
    measure_quality();
    for (Node& n : nodes_) {
      if (n.process) n.process->stop(std::chrono::milliseconds(5000));
    }
    finish_records();
    run_.wall_s = std::chrono::duration<double>(Clock::now() - t0_).count();
    return std::move(run_);
  }

 private:
  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
  }

  void draw_requests() {
    sim::Workload w = sim::scenario_workload(spec_);
    int clipped = 0;
    while (auto a = w.next()) {
      if (a->arrival_ns >= run_.duration_ns) break;
      Request r;
      r.arrival = *a;
      if (r.arrival.prompt_tokens > o_.max_tokens) ++clipped;
      r.arrival.prompt_tokens = std::clamp<std::int64_t>(r.arrival.prompt_tokens, 1, o_.max_tokens);
      std::vector<std::int32_t> after;
      r.prompt = context_ids(setup_, r.arrival.prompt_tokens,
                             o_.inputs.seed * 1000003 + r.arrival.id, 0, after);
      requests_.push_back(std::move(r));
    }
    if (clipped > 0) {
      run_.notes.push_back(std::to_string(clipped) + " prompts clipped to --max-tokens " +
                           std::to_string(o_.max_tokens) +
                           " (the simulator run is given the same clipped prompts)");
    }
  }

  void start_node(int n) {
    std::vector<int> close_in_child;
    for (const Node& other : nodes_) {
      if (other.process) close_in_child.push_back(other.process->channel().fd());
    }
    NodeConfig config{nodes_[n].name, &spec_, &setup_, o_.continuation > 0,
                      strategy_ == Strategy::kProxyKv};
    Node& node = nodes_[n];
    node.process = std::make_unique<NodeProcess>(config, close_in_child);
    const std::optional<Json> ready = node.process->channel().receive();
    if (!ready || ready->value("ev", "") != "ready") {
      throw std::runtime_error("replay: node " + node.name + " did not start");
    }
    node.port = ready->at("port");
    node.up = true;
    node.draining = false;
  }

  // ------------------------------------------------------------------ the event loop

  void serve() {
    std::size_t next_arrival = 0;
    std::size_t next_event = 0;
    const std::vector<sim::EventSpec>& events = spec_.events;
    for (;;) {
      const std::int64_t now = now_ns();
      while (next_arrival < requests_.size() && requests_[next_arrival].arrival.arrival_ns <= now) {
        pending_.push_back(next_arrival++);
      }
      while (next_event < events.size() &&
             static_cast<std::int64_t>(events[next_event].at.value * 1e9) <= now) {
        fire(events[next_event++]);
      }
      while (!timers_.empty() && timers_.front().first <= now) {
        auto fn = std::move(timers_.front().second);
        timers_.pop_front();
        fn();
      }
      dispatch();
      if (now >= run_.duration_ns) return;
      if (next_arrival == requests_.size() && next_event == events.size() && timers_.empty() &&
          std::all_of(requests_.begin(), requests_.end(),
                      [](const Request& r) { return r.phase == Phase::kDone; })) {
        return;
      }
      std::int64_t wake = run_.duration_ns;
      if (next_arrival < requests_.size()) {
        wake = std::min(wake, requests_[next_arrival].arrival.arrival_ns);
      }
      if (next_event < events.size()) {
        wake = std::min(wake, static_cast<std::int64_t>(events[next_event].at.value * 1e9));
      }
      if (!timers_.empty()) wake = std::min(wake, timers_.front().first);
      poll_nodes(std::clamp<std::int64_t>((wake - now) / 1000000 + 1, 0, 100));
    }
  }

  void poll_nodes(std::int64_t timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n].up) continue;
      fds.push_back({nodes_[n].process->channel().fd(), POLLIN, 0});
      which.push_back(static_cast<int>(n));
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(timeout_ms)) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int n = which[i];
      std::vector<Json> messages;
      const bool open = nodes_[n].process->channel().read_available(messages);
      for (const Json& m : messages) on_message(n, m);
      if (!open && nodes_[n].up) {
        node_failed(n, Seconds{0}, "its process ended unexpectedly");
      }
    }
  }

  void after(std::int64_t delay_ns, std::function<void()> fn) {
    const std::int64_t at = now_ns() + delay_ns;
    auto it =
        std::find_if(timers_.begin(), timers_.end(), [&](const auto& t) { return t.first > at; });
    timers_.insert(it, {at, std::move(fn)});
  }

  // ------------------------------------------------------------------ routing

  /// What node `n` holds or is receiving: requests, and the KV tokens they will hold at
  /// their end (what the simulator's admission books, and its router compares).
  struct Load {
    int requests = 0;
    std::int64_t booked_tokens = 0;
  };
  Load load(int n) const {
    Load l;
    for (const Request& r : requests_) {
      const bool here =
          r.phase == Phase::kMoving && r.move >= 0
              ? open_[static_cast<std::size_t>(r.move)].dst == n
              : (r.phase == Phase::kQueued || r.phase == Phase::kDecoding) && r.node == n;
      if (!here) continue;
      ++l.requests;
      l.booked_tokens += r.arrival.prompt_tokens + r.arrival.output_tokens;
    }
    return l;
  }

  /// The up, undrained node with the least KV booked (ties: the first), other than
  /// `except`, with room for one more in its batch when `batch_room`; -1 if none. (The
  /// simulator's least-loaded router: every node has the same KV capacity here.)
  int least_loaded(int except, bool batch_room) const {
    int best = -1;
    std::int64_t best_booked = 0;
    for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
      const Node& node = nodes_[n];
      if (!node.up || node.draining || n == except) continue;
      const Load l = load(n);
      if (batch_room && l.requests >= spec_.serving.max_batch) continue;
      if (best < 0 || l.booked_tokens < best_booked) best = n, best_booked = l.booked_tokens;
    }
    return best;
  }

  void dispatch() {
    while (!pending_.empty()) {
      const int n = least_loaded(-1, true);
      if (n < 0) return;
      Request& r = requests_[pending_.front()];
      pending_.pop_front();
      r.node = n;
      r.phase = Phase::kQueued;
      if (r.first_node.empty()) r.first_node = nodes_[n].name;
      nodes_[n].process->channel().send({{"op", "admit"},
                                         {"id", r.arrival.id},
                                         {"epoch", r.epoch},
                                         {"prompt", r.prompt},
                                         {"output", r.arrival.output_tokens}});
    }
  }

  // ------------------------------------------------------------------ events

  void fire(const sim::EventSpec& e) {
    const int n = node_index(e.node);
    switch (e.kind) {
      case sim::EventKind::kDrain:
        drain(n);
        break;
      case sim::EventKind::kNodeFailure: {
        nodes_[n].process->kill();
        node_failed(n, e.detection_delay, "failed (process killed)");
        if (e.repair_after) {
          after(static_cast<std::int64_t>(e.repair_after->value * 1e9), [this, n] { repair(n); });
        }
        break;
      }
      case sim::EventKind::kNodeRepair:
        repair(n);
        break;
      default:
        break;  // check_replayable refused the rest
    }
  }

  int node_index(const std::string& name) const {
    for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
      if (nodes_[n].name == name) return n;
    }
    throw std::logic_error("replay: no node " + name);
  }

  void drain(int n) {
    if (!nodes_[n].up) return;
    nodes_[n].draining = true;
    for (Request& r : requests_) {
      if (r.node != n || (r.phase != Phase::kDecoding && r.phase != Phase::kQueued)) continue;
      const int dst = least_loaded(n, false);
      if (dst < 0) continue;  // nowhere to go: it finishes here
      start_move(r, sim::MoveTrigger::kDrain, n, dst);
    }
  }

  void start_move(Request& r, sim::MoveTrigger trigger, int src, int dst) {
    sim::MoveRecord m;
    m.request = r.arrival.id;
    m.trigger = trigger;
    m.from = nodes_[src].name;
    m.to = nodes_[dst].name;
    m.requested = m.strategy = cost_model::strategy_name(strategy_);
    m.source = m.from;
    m.start_ns = m.end_ns = now_ns();
    m.context_tokens = m.available_tokens =
        r.arrival.prompt_tokens + std::max<std::int64_t>(0, std::ssize(r.generated) - 1);
    Json command{{"op", "move"},           {"id", r.arrival.id},       {"epoch", r.epoch},
                 {"to", nodes_[dst].name}, {"port", nodes_[dst].port}, {"strategy", m.strategy}};
    if (strategy_ == Strategy::kHybrid) {
      m.front_tokens = hybrid_front(m.context_tokens, src, dst);
      m.available_tokens = m.context_tokens - m.front_tokens;  // the KV shipped, as the sim's
      command["front"] = m.front_tokens;
    }
    r.move = static_cast<int>(run_.moves.size());
    run_.moves.push_back(m);
    open_.push_back({dst, r.epoch, m.start_ns, true});
    r.phase = Phase::kMoving;
    nodes_[src].process->channel().send(command);
  }

  /// Hybrid's split, as the simulator plans it (cost_model::balance_hybrid): the tokens
  /// whose KV the receiver recomputes while the rest's KV travels, with what the simulator
  /// reads off its model of the cluster estimated from here: the bandwidth a new flow gets
  /// beside the moves on the wire (on a star, the source's uplink and the receiver's downlink
  /// are shared fairly) and the receiver's backlog (half the table's decode step of the
  /// batch it decodes: the expected rest of its step in flight; the simulator knows it).
  std::int64_t hybrid_front(std::int64_t context, int src, int dst) const {
    const cost_model::MoveMethods mm = sim::move_methods(spec_);
    cost_model::MoveState st;
    st.context = st.available = context;
    const ShapedPath path = links_.path(nodes_[src].name, nodes_[dst].name);
    int from_src = 0, into_dst = 0;
    for (std::size_t i = 0; i < open_.size(); ++i) {
      if (!open_[i].on_wire) continue;
      from_src += run_.moves[i].from == nodes_[src].name;
      into_dst += open_[i].dst == dst;
    }
    cost_model::MoveRoute route;
    route.data = cost_model::MoveRoute::Leg::kNetwork;
    route.data_path = {
        BitsPerSecond{path.bottleneck().value / (std::max(from_src, into_dst) + 1.0)},
        Seconds{std::chrono::duration<double>(path.latency).count()}};
    std::int64_t batch = 0, held = 0;
    for (const Request& r : requests_) {
      if (r.node != dst || r.phase != Phase::kDecoding) continue;
      ++batch;
      held += r.arrival.prompt_tokens + std::ssize(r.generated);
    }
    const std::int64_t backlog_ns =
        batch == 0
            ? 0
            : static_cast<std::int64_t>(0.5e9 * costs_.decode_step(*mm.model, batch, held).value);
    return cost_model::balance_hybrid(cost_model::plan_move(Strategy::kHybrid, mm, st), mm, route,
                                      backlog_ns, costs_)
        .front_tokens;
  }

  /// Node `n` is gone: what it held is recovered elsewhere after `detection_delay`.
  void node_failed(int n, Seconds detection_delay, const std::string& why) {
    Node& node = nodes_[n];
    node.up = false;
    node.process->kill();
    run_.notes.push_back(node.name + " " + why + " at " +
                         std::to_string(static_cast<double>(now_ns()) * 1e-9) + " s");
    for (Request& r : requests_) {
      const bool moving_here = r.phase == Phase::kMoving && r.move >= 0 &&
                               (open_[static_cast<std::size_t>(r.move)].dst == n ||
                                run_.moves[static_cast<std::size_t>(r.move)].from == node.name);
      if (r.phase == Phase::kDone || (r.node != n && !moving_here)) continue;
      if (moving_here) end_move(r, sim::MoveOutcome::kFailed, node.name + " " + why);
      ++r.epoch;  // whatever it had in flight is stale now
      r.node = -1;
      if (r.generated.empty()) {
        r.phase = Phase::kPending;
        pending_.push_front(static_cast<std::size_t>(&r - requests_.data()));
        continue;
      }
      r.phase = Phase::kMoving;  // lost: waits for the failure to be detected
      const std::size_t i = static_cast<std::size_t>(&r - requests_.data());
      after(static_cast<std::int64_t>(detection_delay.value * 1e9),
            [this, i, n, epoch = r.epoch, at = now_ns()] { recover(i, n, epoch, at); });
    }
  }

  /// Rebuilds a lost request from its tokens on the least loaded node (its KV died with
  /// its node: no replica is kept). As in the simulator, the move starts once the loss is
  /// detected, and its stall counts from the loss (`lost_ns`). The move starts when it was lost
  /// (`lost_ns`), as the simulator's recoveries do: the detection delay is part of it.
  void recover(std::size_t i, int failed, std::int64_t epoch, std::int64_t lost_ns) {
    Request& r = requests_[i];
    if (r.epoch != epoch || r.phase == Phase::kDone) return;
    const auto remaining = r.arrival.output_tokens - std::ssize(r.generated);
    const int dst = least_loaded(-1, false);
    if (dst < 0) {  // nowhere yet: try again shortly
      after(100'000'000, [this, i, failed, epoch, lost_ns] { recover(i, failed, epoch, lost_ns); });
      return;
    }
    sim::MoveRecord m;
    m.request = r.arrival.id;
    m.trigger = sim::MoveTrigger::kFailure;
    m.from = nodes_[failed].name;
    m.to = nodes_[dst].name;
    m.requested = cost_model::strategy_name(strategy_);
    m.strategy = cost_model::strategy_name(Strategy::kTokenReplay);
    if (m.strategy != m.requested) m.fallback = "the KV died with its node (no replica kept)";
    m.start_ns = now_ns();
    m.context_tokens = r.arrival.prompt_tokens + std::ssize(r.generated) - 1;
    m.available_tokens = 0;
    r.move = static_cast<int>(run_.moves.size());
    run_.moves.push_back(m);
    open_.push_back({dst, r.epoch, lost_ns, false});
    r.node = dst;
    std::vector<std::int32_t> context = r.prompt;
    context.insert(context.end(), r.generated.begin(), r.generated.end() - 1);
    nodes_[dst].process->channel().send({{"op", "resume"},
                                         {"id", r.arrival.id},
                                         {"epoch", r.epoch},
                                         {"context", context},
                                         {"next", r.generated.back()},
                                         {"remaining", remaining}});
  }

  void repair(int n) {
    if (nodes_[n].up) return;
    start_node(n);
    run_.notes.push_back(nodes_[n].name + " restarted at " +
                         std::to_string(static_cast<double>(now_ns()) * 1e-9) + " s");
  }

  // ------------------------------------------------------------------ messages

  Request* current(const Json& m) {
    const auto id = m.at("id").get<std::size_t>();
    if (id >= requests_.size()) return nullptr;
    Request& r = requests_[id];
    return r.epoch == m.at("epoch").get<std::int64_t>() ? &r : nullptr;
  }

  void on_message(int n, const Json& m) {
    const std::string ev = m.at("ev");
    if (ev == "tokens") {
      on_tokens(m);
    } else if (ev == "landed") {
      Request* r = current(m);
      if (r == nullptr || r->move < 0) {  // a stale copy: the request lives elsewhere now
        nodes_[n].process->channel().send({{"op", "drop"}, {"id", m["id"]}, {"epoch", m["epoch"]}});
        return;
      }
      sim::MoveRecord& rec = run_.moves[static_cast<std::size_t>(r->move)];
      rec.compute_ns = static_cast<std::int64_t>(
          (m.at("decode_s").get<double>() + m.at("compute_s").get<double>()) * 1e9);
      rec.queue_ns += static_cast<std::int64_t>(m.at("queue_s").get<double>() * 1e9);
      rec.kv_bytes = m.at("kv_bytes");
      rec.token_bytes = m.at("token_bytes");
      r->node = n;
      end_move(*r, sim::MoveOutcome::kDone, "");
      r->phase = Phase::kDecoding;
    } else if (ev == "sent") {
      // The receiver may have said "landed" first: the move is found by request and epoch.
      const int i = move_of(m.at("id"), m.at("epoch"));
      if (i < 0) return;
      sim::MoveRecord& rec = run_.moves[static_cast<std::size_t>(i)];
      OpenMove& open = open_[static_cast<std::size_t>(i)];
      open.on_wire = false;
      rec.transfer_ns = static_cast<std::int64_t>(m.at("transfer_s").get<double>() * 1e9);
      const double wait_s = m.at("wait_s"), prepare_s = m.at("prepare_s");
      rec.queue_ns += static_cast<std::int64_t>((wait_s + prepare_s) * 1e9);
      open.source_wait_ns = static_cast<std::int64_t>(wait_s * 1e9);
      if (rec.note.empty()) {  // the part of queue_s the simulator does not charge, split
        rec.note = "source: " + format_ms(Seconds{wait_s}, 1) +
                   " waiting for the step in flight, " + format_ms(Seconds{prepare_s}, 1) +
                   " packing";
      }
      Request* r = current(m);
      if (r == nullptr || r->move != i) return;  // ended (landed, or lost with a node)
      if (!m.at("ok").get<bool>()) {
        end_move(*r, sim::MoveOutcome::kFailed, m.at("reason"));
        lose(*r, n);
      }
    } else if (ev == "requeue") {
      Request* r = current(m);
      if (r == nullptr || r->move < 0) return;
      open_[static_cast<std::size_t>(r->move)].counted = false;
      r->move = -1;
      r->node = -1;
      r->phase = Phase::kPending;
      pending_.push_front(static_cast<std::size_t>(r - requests_.data()));
    } else if (ev == "gone") {
      if (measuring_) {  // no cache kept for it: nothing to measure
        quality_replies_.push_back(m);
        return;
      }
      Request* r = current(m);
      if (r != nullptr && r->move >= 0) {
        end_move(*r, sim::MoveOutcome::kCancelled, "the request finished before it moved");
      }
    } else if (ev == "quality") {
      quality_replies_.push_back(m);
    }
  }

  /// The last move of request `id` made at `epoch`; -1 if none.
  int move_of(std::uint64_t id, std::int64_t epoch) const {
    for (int i = static_cast<int>(run_.moves.size()) - 1; i >= 0; --i) {
      if (run_.moves[static_cast<std::size_t>(i)].request == id &&
          open_[static_cast<std::size_t>(i)].epoch == epoch) {
        return i;
      }
    }
    return -1;
  }

  /// A move failed on the wire: the source let the request go, so it is rebuilt from its
  /// tokens as after a failure (no detection delay: the sender knows).
  void lose(Request& r, int src) {
    ++r.epoch;
    r.phase = Phase::kMoving;
    after(0, [this, i = static_cast<std::size_t>(&r - requests_.data()), src, e = r.epoch,
              at = now_ns()] { recover(i, src, e, at); });
  }

  void on_tokens(const Json& m) {
    const std::int64_t now = now_ns();
    for (const Json& item : m.at("items")) {
      const auto id = item[0].get<std::size_t>();
      Request& r = requests_.at(id);
      if (r.epoch != item[1].get<std::int64_t>()) continue;
      r.generated.push_back(item[2].get<std::int32_t>());
      if (r.phase == Phase::kQueued) r.phase = Phase::kDecoding;
      if (r.generated.size() == 1) first_token_ns_[id] = now;
    }
    for (const Json& item : m.at("done")) {
      Request& r = requests_.at(item[0].get<std::size_t>());
      if (r.epoch != item[1].get<std::int64_t>() || r.phase == Phase::kDone) continue;
      r.phase = Phase::kDone;
      finish_ns_[r.arrival.id] = now;
    }
  }

  void end_move(Request& r, sim::MoveOutcome outcome, const std::string& note) {
    sim::MoveRecord& rec = run_.moves[static_cast<std::size_t>(r.move)];
    rec.outcome = outcome;
    if (!note.empty()) rec.note = rec.note.empty() ? note : note + "; " + rec.note;
    rec.end_ns = now_ns();
    OpenMove& open = open_[static_cast<std::size_t>(r.move)];
    open.on_wire = false;
    rec.stall_ns = rec.end_ns - open.stalled_since;
    r.move = -1;
  }

  // ------------------------------------------------------------------ after the run

  void measure_quality() {
    run_.quality.assign(run_.moves.size(), {});
    for (Node& n : nodes_) {  // the run is over: what they still serve is unfinished
      if (n.up) n.process->channel().send({{"op", "halt"}});
    }
    if (o_.continuation <= 0) return;
    measuring_ = true;
    int asked = 0;
    for (std::size_t i = 0; i < run_.moves.size(); ++i) {
      const sim::MoveRecord& rec = run_.moves[i];
      const OpenMove& om = open_[i];
      if (rec.outcome != sim::MoveOutcome::kDone || !om.counted || !nodes_[om.dst].up) continue;
      nodes_[om.dst].process->channel().send({{"op", "quality"},
                                              {"id", rec.request},
                                              {"epoch", om.epoch},
                                              {"steps", o_.continuation},
                                              {"seed", o_.inputs.seed * 7919 + rec.request},
                                              {"following", Json::array()}});
      ++asked;
    }
    if (asked > 0 && progress_) {
      progress_(std::to_string(asked) +
                " moved requests: measuring what each move did to its text");
    }
    const auto deadline = Clock::now() + std::chrono::minutes(10);
    while (static_cast<int>(quality_replies_.size()) < asked && Clock::now() < deadline) {
      const std::size_t before = quality_replies_.size();
      poll_nodes(1000);
      if (quality_replies_.size() == before &&
          std::none_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.up; })) {
        break;
      }
    }
    for (const Json& q : quality_replies_) {
      if (q.at("ev") != "quality") continue;
      for (std::size_t i = 0; i < run_.moves.size(); ++i) {
        if (run_.moves[i].request != q.at("id").get<std::uint64_t>() ||
            open_[i].epoch != q.at("epoch").get<std::int64_t>() ||
            run_.moves[i].outcome != sim::MoveOutcome::kDone) {
          continue;
        }
        run_.quality[i] = {q.at("steps"), q.at("greedy_agreement"), q.at("sampled_agreement"),
                           q.at("delta_nll")};
      }
    }
  }

  /// Requests' records (unfinished ones say so), and each move's ΔNLL as the simulator
  /// charges it (its plan's).
  void finish_records() {
    const std::int64_t end = now_ns();
    for (Request& r : requests_) {
      sim::RequestRecord rec;
      rec.id = r.arrival.id;
      rec.prompt_tokens = r.arrival.prompt_tokens;
      rec.output_tokens = r.arrival.output_tokens;
      rec.arrival_ns = r.arrival.arrival_ns;
      rec.first_node = r.first_node;
      if (r.node >= 0) rec.final_node = nodes_[r.node].name;
      if (auto it = first_token_ns_.find(rec.id); it != first_token_ns_.end()) {
        rec.first_token_ns = it->second;
      }
      if (auto it = finish_ns_.find(rec.id); it != finish_ns_.end()) {
        rec.finish_ns = it->second;
        rec.outcome = sim::RequestOutcome::kCompleted;
      } else if (r.arrival.arrival_ns < run_.duration_ns) {
        rec.reason =
            r.generated.empty() ? "waiting for its prefill at the end" : "decoding at the end";
      }
      run_.requests.push_back(rec);
      if (r.move >= 0) {
        sim::MoveRecord& m = run_.moves[static_cast<std::size_t>(r.move)];
        m.outcome = sim::MoveOutcome::kUnfinished;
        m.note = "still moving at the end";
        m.end_ns = end;
      }
    }
    for (const sim::MoveRecord& m : run_.moves) {
      if (m.outcome == sim::MoveOutcome::kDone) ++requests_moves_[m.request];
    }
    for (sim::RequestRecord& rec : run_.requests) rec.moves = requests_moves_[rec.id];
    std::vector<sim::MoveRecord> kept;
    std::vector<MoveQuality> quality;
    std::vector<std::int64_t> source_wait;
    const cost_model::MoveMethods mm = sim::move_methods(spec_);
    for (std::size_t i = 0; i < run_.moves.size(); ++i) {
      if (!open_[i].counted) continue;
      sim::MoveRecord m = run_.moves[i];
      cost_model::MoveState st;
      st.context = m.context_tokens;
      st.available = m.available_tokens + m.front_tokens;  // what the source held
      st.predictor_at_dst = true;  // every node holds the predictors (loaded before the fork)
      const auto strategy = *cost_model::strategy_named(m.strategy);
      m.delta_nll = cost_model::plan_move(strategy, mm, st).delta_nll;
      kept.push_back(m);
      quality.push_back(run_.quality[i]);
      source_wait.push_back(open_[i].source_wait_ns);
    }
    run_.moves = std::move(kept);
    run_.quality = std::move(quality);
    run_.source_wait_ns = std::move(source_wait);
  }

  const input::ScenarioSpec& spec_;
  const MoveSetup& setup_;
  const cost_model::ComputeCosts& costs_;
  const ReplayOptions& o_;
  const Strategy strategy_;
  const std::function<void(const std::string&)>& progress_;
  const ClusterLinks links_;  ///< the paths' rates and latencies (hybrid's split)
  ReplayRun run_;
  Clock::time_point t0_;
  std::vector<Request> requests_;
  std::deque<std::size_t> pending_;
  std::vector<Node> nodes_;
  std::vector<OpenMove> open_;                                         ///< parallel to run_.moves
  std::deque<std::pair<std::int64_t, std::function<void()>>> timers_;  ///< by time
  std::map<std::uint64_t, std::int64_t> first_token_ns_, finish_ns_;
  std::map<std::uint64_t, int> requests_moves_;
  bool measuring_ = false;  ///< the run is over: replies are quality measurements
  std::vector<Json> quality_replies_;
};

}  // namespace

void check_replayable(const input::ScenarioSpec& spec) {
  const std::string at = spec.source + ": ";
  const auto gpus = gpu_names(spec).size();
  if (gpus < 2 || gpus > static_cast<std::size_t>(kMaxReplayNodes)) {
    throw InputError(at + "/cluster: replay serves 2 to " + std::to_string(kMaxReplayNodes) +
                     " GPU nodes as processes on this machine (the scenario has " +
                     std::to_string(gpus) + ")");
  }
  for (const auto& n : spec.cluster.nodes) {
    if (n.kind == sim::NodeKind::kGpu && n.gpu_count != 1) {
      throw InputError(at + "/cluster/node/gpus: replay runs one GPU per node (one process)");
    }
  }
  if (!spec.deployments.empty()) throw InputError(at + "/deployments: replay serves one model");
  if (!spec.pools.empty())
    throw InputError(at + "/pools: replay does not split prefill and decode");
  if (spec.protection.mode != sim::ProtectionMode::kNone) {
    throw InputError(at + "/protection/mode: replay keeps no replicas (use \"none\")");
  }
  if (spec.serving.prefix_cache.enabled) {
    throw InputError(at + "/serving/prefix_cache: replay does not cache prefixes");
  }
  if (spec.serving.preemption)
    throw InputError(at + "/serving/preemption: replay does not preempt");
  if (spec.serving.prefill_chunk_tokens > 0) {
    throw InputError(at + "/serving/prefill_chunk_tokens: replay prefills whole prompts");
  }
  if (spec.policies.rebalance.enabled) {
    throw InputError(at + "/policies/rebalance: replay does not rebalance");
  }
  for (std::size_t i = 0; i < spec.events.size(); ++i) {
    const sim::EventKind k = spec.events[i].kind;
    if (k != sim::EventKind::kDrain && k != sim::EventKind::kNodeFailure &&
        k != sim::EventKind::kNodeRepair) {
      throw InputError(at + "/events/" + std::to_string(i) + "/type: replay runs drains, " +
                       "node failures and repairs, not " + sim::event_kind_name(k));
    }
  }
  if (spec.duration.value <= 0 || spec.duration.value > 3600) {
    throw InputError(at + "/duration: replay runs in real time, at most 3600 s");
  }
}

std::vector<Strategy> replay_strategies(const input::ScenarioSpec& spec,
                                        const std::vector<Strategy>& asked) {
  std::vector<Strategy> out;
  for (Strategy s : asked.empty() ? spec.policies.strategies : asked) {
    if (!cost_model::traits(s).concrete) {
      if (!asked.empty()) {
        throw InputError("--strategies: replay runs concrete strategies (not \"" +
                         std::string(cost_model::strategy_name(s)) + "\")");
      }
      continue;  // the scenario's adaptive: its picks are the concrete runs
    }
    if (!cost_model::traits(s).on_testbed && s != Strategy::kHybrid) {
      throw InputError(std::string(asked.empty() ? "policies.strategies" : "--strategies") +
                       ": replay does not run \"" + cost_model::strategy_name(s) + "\"");
    }
    if (s == Strategy::kRiskKv && !(spec.risk_kv && !spec.risk_kv->omission.empty())) {
      throw InputError("risk_kv: the scenario has no RISK-KV topology to replay");
    }
    if (s == Strategy::kProxyKv && !spec.proxy_kv) {
      throw InputError("proxy_kv: the scenario has no ProxyKV section to replay");
    }
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  if (out.empty()) throw InputError("policies.strategies: no concrete strategy to replay");
  return out;
}

std::vector<ReplayRun> run_replay(const input::ScenarioSpec& spec, const MoveSetup& setup,
                                  const cost_model::ComputeCosts& costs,
                                  const ReplayOptions& options,
                                  const std::function<void(const std::string&)>& progress) {
  check_replayable(spec);
  std::vector<ReplayRun> runs;
  for (Strategy s : replay_strategies(spec, options.strategies)) {
    if (progress) {
      progress(std::string(cost_model::strategy_name(s)) + ": serving " + spec.name + " for " +
               format_number("%g", spec.duration.value) + " s");
    }
    runs.push_back(Replay(spec, setup, costs, options, s, progress).run());
  }
  return runs;
}

}  // namespace kvshift::testbed
