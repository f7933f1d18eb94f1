// The node's serving loop, its moves out and in, and its quality measurements.
#include "testbed/replay_node.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

#include "testbed/agent.hpp"
#include "testbed/cluster_links.hpp"
#include "testbed/continuation.hpp"
#include "testbed/kv_payload.hpp"
#include "testbed/receiver_work.hpp"
#include "testbed/replay_channel.hpp"

namespace kvshift::testbed {
namespace {

using cost_model::Strategy;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::int32_t greedy(const backend::Matrix& logits, Eigen::Index row) {
  Eigen::Index best = 0;
  logits.row(row).maxCoeff(&best);
  return static_cast<std::int32_t>(best);
}

/// A request this node holds: its KV covers `context`; `next` is its last token, fed at
/// the next decode step.
struct Held {
  std::uint64_t id = 0;
  std::int64_t epoch = 0;
  std::vector<std::int32_t> context;
  backend::KvCache cache;
  std::int32_t next = 0;
  std::int64_t remaining = 0;  ///< tokens still to produce
  /// ProxyKV's scores of its prompt, computed after its prefill (empty: none).
  backend::Matrix scores;
};

/// Admitted or resumed, waiting for its prefill.
struct Waiting {
  Json command;
  Clock::time_point since;
};

/// A move delivered, waiting for the serving loop to rebuild it.
struct Arrival {
  Json meta;
  Delivery delivery;
  Clock::time_point at;
};

/// A hybrid move's two parts as they arrive.
struct HybridParts {
  backend::KvCache front, back;  ///< the front prefilled here; the rest's rows as received
  std::int64_t front_tokens = 0;
  bool has_front = false;
  Json meta;  ///< the KV part's (null until it arrives)
  double queue_s = 0, decode_s = 0, compute_s = 0;
};

/// Hybrid's front ids travel as a transfer of their own, beside the request's KV transfer.
inline constexpr std::uint64_t kFrontTransfer = 1ULL << 62;

/// A moved-in cache kept for `quality`.
struct MovedIn {
  std::vector<std::int32_t> context;
  std::int32_t next = 0;
  backend::KvCache cache;
};

class Node {
 public:
  Node(const NodeConfig& c, int fd)
      : config_(c),
        model_(*c.setup->model),
        channel_(fd),
        links_(c.spec->cluster),
        agent_(c.name, [this](Delivery&& d) { push_delivery(std::move(d)); }) {}

  int run() {
    if (!channel_.send({{"ev", "ready"}, {"port", agent_.port()}})) return 1;
    std::thread reader([this] { read_commands(); });
    while (step()) {
    }
    agent_.stop();
    reader.join();
    return 0;
  }

 private:
  void read_commands() {
    while (auto m = channel_.receive()) {
      const bool stop = m->value("op", "") == "stop";
      push_command(std::move(*m));
      if (stop) return;
    }
    push_command({{"op", "stop"}});  // the coordinator is gone
  }
  void push_command(Json m) {
    const std::lock_guard lock(mutex_);
    m["arrived_ns"] = Clock::now().time_since_epoch().count();  // when it was read
    commands_.push_back(std::move(m));
    wake_.notify_one();
  }
  /// On the Agent's socket thread. KV that needs no GPU work to be used (full KV, ProxyKV's
  /// kept tokens) is unpacked on the Agent's compute thread, beside the serving loop, as a
  /// copy into HBM runs beside a GPU's kernels; the rest (RISK-KV's reconstruction, replay's
  /// prefill) is work for the serving loop, queued behind its current iteration.
  void push_delivery(Delivery&& d) {
    const auto arrived = Clock::now();
    std::optional<Json> meta = take_meta(d);
    if (!meta) return;  // not a move
    const Strategy strategy = *cost_model::strategy_named(meta->at("strategy").get<std::string>());
    if (strategy == Strategy::kFullKv || strategy == Strategy::kProxyKv) {
      auto delivery = std::make_shared<Delivery>(std::move(d));
      agent_.compute([this, delivery, meta = std::move(*meta), arrived] {
        Held h = rebuild_arrival(meta, *delivery, arrived);
        const std::lock_guard lock(mutex_);
        landed_.push_back(std::move(h));
        wake_.notify_one();
      });
      return;
    }
    const std::lock_guard lock(mutex_);
    deliveries_.push_back({std::move(*meta), std::move(d), arrived});
    wake_.notify_one();
  }

  /// One iteration; false once stopped.
  bool step() {
    std::deque<Json> commands;
    std::deque<Arrival> deliveries;
    std::deque<Held> landed;
    {
      std::unique_lock lock(mutex_);
      const auto has_input = [&] {
        return !commands_.empty() || !deliveries_.empty() || !landed_.empty();
      };
      if (resumes_.empty() && waiting_.empty() && running_.empty()) wake_.wait(lock, has_input);
      commands.swap(commands_);
      deliveries.swap(deliveries_);
      landed.swap(landed_);
    }
    for (Json& c : commands) {
      if (!handle(c)) return false;
    }
    for (Arrival& a : deliveries) {
      if (a.meta.at("strategy") != "hybrid") {
        landed.push_back(rebuild_arrival(a.meta, a.delivery, a.at));
      } else if (std::optional<Held> h = hybrid_part(a)) {
        landed.push_back(std::move(*h));
      }
    }
    for (Held& h : landed) join(std::move(h));
    // A recovery's prefill is a job: it runs ahead of new requests and of decoding, batch
    // room or not (the request then waits for a place in the batch).
    if (!resumes_.empty()) {
      prefill(resumes_.front());
      resumes_.pop_front();
    } else if (!waiting_.empty() && running_.size() < max_batch()) {
      prefill(waiting_.front());
      waiting_.pop_front();
    } else if (!running_.empty()) {
      decode();
    }
    return true;
  }

  std::size_t max_batch() const {
    return static_cast<std::size_t>(std::max(1, config_.spec->serving.max_batch));
  }

  bool handle(Json& c) {
    const std::string op = c.at("op");
    if (op == "stop") return false;
    if (op == "halt") {  // the run is over: serve nothing more (moved-in caches stay)
      waiting_.clear();
      resumes_.clear();
      running_.clear();
      return true;
    }
    if (op == "admit" || op == "resume") {
      (op == "admit" ? waiting_ : resumes_).push_back({std::move(c), Clock::now()});
    } else if (op == "move") {
      move_out(c);
    } else if (op == "drop") {
      const auto id = c.at("id").get<std::uint64_t>();
      std::erase_if(running_, [&](const Held& h) { return h.id == id; });
      for (auto* queue : {&waiting_, &resumes_}) {
        std::erase_if(*queue, [&](const Waiting& w) { return w.command.at("id") == id; });
      }
    } else if (op == "quality") {
      measure_quality(c);
    }
    return true;
  }

  void prefill(const Waiting& w) {
    const Json& c = w.command;
    const bool resume = c.at("op") == "resume";
    Held h;
    h.id = c.at("id");
    h.epoch = c.at("epoch");
    h.cache = model_.new_cache();
    backend::ForwardOptions o;
    o.logits = resume ? backend::LogitsMode::kNone : backend::LogitsMode::kLast;
    const auto t0 = Clock::now();
    if (resume) {
      h.context = c.at("context").get<std::vector<std::int32_t>>();
      model_.forward(h.context, h.cache, o);
      h.next = c.at("next");
      h.remaining = c.at("remaining");
      if (config_.keep_moved_caches) moved_in_[{h.id, h.epoch}] = {h.context, h.next, h.cache};
      channel_.send({{"ev", "landed"},
                     {"id", h.id},
                     {"epoch", h.epoch},
                     {"strategy", "token_replay"},
                     {"work", "prefill"},
                     {"queue_s", std::chrono::duration<double>(t0 - w.since).count()},
                     {"decode_s", 0.0},
                     {"compute_s", since(t0)},
                     {"kv_bytes", 0},
                     {"token_bytes", 0}});  // its ids came over the control channel
    } else {
      h.context = c.at("prompt").get<std::vector<std::int32_t>>();
      o.stats.mass = config_.score_prompts && !config_.setup->mapper;  // H2O's scores
      const backend::ForwardResult r = model_.forward(h.context, h.cache, o);
      h.next = greedy(r.logits, 0);
      h.remaining = c.at("output").get<std::int64_t>() - 1;
      Json done = Json::array();
      if (h.remaining <= 0) done.push_back({h.id, h.epoch});
      channel_.send({{"ev", "tokens"}, {"items", {{h.id, h.epoch, h.next}}}, {"done", done}});
      // The scoring job, on this GPU after the prefill (the simulator's target_stream).
      if (config_.score_prompts && h.remaining > 0) {
        h.scores = proxykv_scores_of(*config_.setup, h.context, &r);
      }
    }
    if (h.remaining > 0) running_.push_back(std::move(h));
  }

  /// One step of the batch: the first max_batch running requests (moved-in ones beyond it
  /// wait for a place).
  void decode() {
    const std::size_t batch = std::min(running_.size(), max_batch());
    std::vector<std::int32_t> tokens;
    std::vector<backend::KvCache*> caches;
    for (std::size_t b = 0; b < batch; ++b) {
      tokens.push_back(running_[b].next);
      caches.push_back(&running_[b].cache);
    }
    const backend::Matrix logits = model_.decode_step(tokens, caches);
    Json items = Json::array(), done = Json::array();
    for (std::size_t b = 0; b < batch; ++b) {
      Held& h = running_[b];
      h.context.push_back(h.next);
      h.next = greedy(logits, static_cast<Eigen::Index>(b));
      --h.remaining;
      items.push_back({h.id, h.epoch, h.next});
      if (h.remaining <= 0) done.push_back({h.id, h.epoch});
    }
    std::erase_if(running_, [](const Held& h) { return h.remaining <= 0; });
    channel_.send({{"ev", "tokens"}, {"items", items}, {"done", done}});
  }

  void move_out(const Json& c) {
    const auto id = c.at("id").get<std::uint64_t>();
    const auto epoch = c.at("epoch").get<std::int64_t>();
    const auto it =
        std::find_if(running_.begin(), running_.end(), [&](const Held& h) { return h.id == id; });
    if (it == running_.end()) {
      const bool waiting = std::erase_if(waiting_, [&](const Waiting& w) {
                             return w.command.at("id") == id && w.command.at("op") == "admit";
                           }) > 0;
      channel_.send({{"ev", waiting ? "requeue" : "gone"}, {"id", id}, {"epoch", epoch}});
      return;
    }
    Held h = std::move(*it);
    running_.erase(it);
    Strategy strategy = *cost_model::strategy_named(c.at("strategy").get<std::string>());
    // A hybrid split that recomputes nothing is a full-KV move: the same bytes, unpacked
    // beside the serving loop rather than joined with a front in it.
    if (strategy == Strategy::kHybrid && c.at("front").get<std::int64_t>() == 0) {
      strategy = Strategy::kFullKv;
    }
    const auto t0 = Clock::now();
    // Before its packing began, the move waited for the iteration in flight (a step boundary).
    const Clock::time_point arrived{Clock::duration{c.at("arrived_ns").get<Clock::rep>()}};
    const Timing timing{std::chrono::duration<double>(t0 - arrived).count(), 0};
    Json meta{{"id", id},
              {"epoch", epoch},
              {"strategy", cost_model::strategy_name(strategy)},
              {"context", h.context},
              {"next", h.next},
              {"remaining", h.remaining}};
    if (strategy == Strategy::kHybrid) {
      // The front's ids travel first and alone: the receiver prefills them while the KV of
      // the rest is on its way.
      const std::int64_t front =
          std::clamp<std::int64_t>(c.at("front").get<std::int64_t>(), 0, std::ssize(h.context));
      const cost_model::ModelSpec& m = model_.spec();
      std::vector<int> layers(static_cast<std::size_t>(m.layers));
      std::iota(layers.begin(), layers.end(), 0);
      KvPayload ids =
          token_ids_payload(std::span(h.context).first(static_cast<std::size_t>(front)));
      KvPayload kv = layers_payload(h.cache, layers, wire_dtype(m), front);
      meta["front"] = front;
      meta["kv_bytes"] = kv.bytes.size();
      Timing t = timing;
      t.prepare_s = since(t0);
      send_part(c, std::move(ids),
                {{"id", id}, {"epoch", epoch}, {"strategy", "hybrid"}, {"part", "front"}},
                id | kFrontTransfer, t, false);
      meta["part"] = "kv";
      send_part(c, std::move(kv), std::move(meta), id, t, true);
      return;
    }
    KvPayload p;
    if (strategy == Strategy::kTokenReplay) {
      p = token_ids_payload(h.context);
    } else if (strategy == Strategy::kProxyKv && h.scores.cols() > 0) {
      const backend::Matrix scores = scores_for_context(h);
      p = ship(strategy, *config_.spec, *config_.setup, h.context, h.cache, &scores);
    } else {  // ProxyKV without scores (a request that moved in) scores it now
      p = ship(strategy, *config_.spec, *config_.setup, h.context, h.cache, nullptr);
    }
    meta["kv_bytes"] = strategy == Strategy::kTokenReplay ? 0 : p.bytes.size();
    Timing t = timing;
    t.prepare_s = since(t0);
    send_part(c, std::move(p), std::move(meta), id, t, true);
  }

  /// How long a move waited for the step in flight, and packed.
  struct Timing {
    double wait_s = 0, prepare_s = 0;
  };

  /// Sends one transfer of move `c`: `p` and its metadata as the last segment. Its end is
  /// reported ("sent") when `report`, or when it fails.
  void send_part(const Json& c, KvPayload p, Json meta, std::uint64_t transfer, Timing t,
                 bool report) {
    const std::string text = meta.dump();
    p.segments.push_back(
        {p.bytes.size(), text.size(), kMetaLayer, kMetaLayer, 0, 0, WireDType::kBytes});
    p.bytes.insert(p.bytes.end(), text.begin(), text.end());
    TransferRequest req;
    req.id = transfer;
    req.path = links_.path(config_.name, c.at("to").get<std::string>());
    req.options = send_options(req.path, {}, p.bytes.size());
    req.port = c.at("port");
    req.segments = std::move(p.segments);
    req.payload = std::make_shared<const std::vector<std::uint8_t>>(std::move(p.bytes));
    const auto id = c.at("id").get<std::uint64_t>();
    const auto epoch = c.at("epoch").get<std::int64_t>();
    agent_.send(std::move(req), [this, id, epoch, t, report](const TransferResult& r) {
      const bool ok = r.state == TransferState::kCompleted;
      if (ok && !report) return;
      channel_.send({{"ev", "sent"},
                     {"id", id},
                     {"epoch", epoch},
                     {"ok", ok},
                     {"reason", r.reason},
                     {"wait_s", t.wait_s},
                     {"prepare_s", t.prepare_s},
                     {"transfer_s", r.seconds()},
                     {"bytes", r.bytes}});
    });
  }

  /// Its prompt's scores, and for the tokens decoded since (no proxy pass saw them) a score
  /// above every prompt token's: the newest tokens are kept first.
  static backend::Matrix scores_for_context(const Held& h) {
    const auto prompt = h.scores.cols();
    backend::Matrix s(h.scores.rows(), static_cast<Eigen::Index>(h.context.size()));
    s.leftCols(prompt) = h.scores;
    const float above = h.scores.maxCoeff() + 1.0F;
    s.rightCols(s.cols() - prompt).setConstant(above);
    return s;
  }

  /// A move's metadata, taken off the end of its delivery; empty if it is not a move.
  static std::optional<Json> take_meta(Delivery& d) {
    if (d.segments.empty() || d.segments.back().layer_begin != kMetaLayer) return std::nullopt;
    const Segment meta = d.segments.back();
    d.segments.pop_back();
    const auto* at = reinterpret_cast<const char*>(d.bytes.data() + meta.offset);
    Json parsed = Json::parse(at, at + meta.length);
    d.bytes.resize(meta.offset);
    return parsed;
  }

  /// The moved-in request with its KV rebuilt; says it landed. Reads only the model, so it
  /// may run beside the serving loop.
  Held rebuild_arrival(const Json& meta, const Delivery& d, Clock::time_point arrived) {
    const Strategy strategy = *cost_model::strategy_named(meta.at("strategy").get<std::string>());
    Held h;
    h.id = meta.at("id");
    h.epoch = meta.at("epoch");
    h.context = meta.at("context").get<std::vector<std::int32_t>>();
    h.next = meta.at("next");
    h.remaining = meta.at("remaining");
    const double queue_s = since(arrived);
    RebuildContext ctx{&model_, config_.setup->predictors,
                       static_cast<std::int64_t>(h.context.size())};
    Rebuilt r = rebuild(strategy, d, ctx);
    h.cache = std::move(r.cache);
    channel_.send({{"ev", "landed"},
                   {"id", h.id},
                   {"epoch", h.epoch},
                   {"strategy", meta.at("strategy")},
                   {"work", r.work},
                   {"queue_s", queue_s},
                   {"decode_s", r.decode_s},
                   {"compute_s", r.compute_s},
                   {"kv_bytes", meta.at("kv_bytes")},
                   {"token_bytes", strategy == Strategy::kTokenReplay ? d.bytes.size() : 0}});
    return h;
  }

  /// A hybrid move's part: the front's ids (prefilled now, in this loop) or the KV of the
  /// rest (unpacked). With both in, the request, its cache the front's rows over the rest's.
  std::optional<Held> hybrid_part(const Arrival& a) {
    const std::pair<std::uint64_t, std::int64_t> key{a.meta.at("id"), a.meta.at("epoch")};
    HybridParts& parts = hybrid_[key];
    const cost_model::ModelSpec& m = model_.spec();
    const auto t0 = Clock::now();
    if (a.meta.at("part") == "front") {
      parts.queue_s = std::chrono::duration<double>(t0 - a.at).count();
      const std::vector<std::int32_t> ids = decode_token_ids(a.delivery.bytes);
      parts.front = model_.new_cache();
      if (!ids.empty()) {
        backend::ForwardOptions o;
        o.logits = backend::LogitsMode::kNone;
        model_.forward(ids, parts.front, o);
      }
      parts.front_tokens = static_cast<std::int64_t>(ids.size());
      parts.compute_s = since(t0);
      parts.has_front = true;
    } else {
      parts.back = decode_layers(a.delivery.bytes, a.delivery.segments, m.layers,
                                 static_cast<int>(m.kv_heads * m.head_dim));
      parts.decode_s = since(t0);
      parts.meta = a.meta;
    }
    if (!parts.has_front || parts.meta.is_null()) return std::nullopt;
    const Json meta = std::move(parts.meta);
    Held h;
    h.id = meta.at("id");
    h.epoch = meta.at("epoch");
    h.context = meta.at("context").get<std::vector<std::int32_t>>();
    h.next = meta.at("next");
    h.remaining = meta.at("remaining");
    h.cache = model_.new_cache();
    for (std::size_t l = 0; l < h.cache.k.size(); ++l) {
      for (auto [to, front, back] :
           {std::tuple{&h.cache.k[l], &parts.front.k[l], &parts.back.k[l]},
            std::tuple{&h.cache.v[l], &parts.front.v[l], &parts.back.v[l]}}) {
        to->resize(front->rows() + back->rows(), front->cols());
        to->topRows(front->rows()) = *front;
        to->bottomRows(back->rows()) = *back;
      }
    }
    channel_.send({{"ev", "landed"},
                   {"id", h.id},
                   {"epoch", h.epoch},
                   {"strategy", "hybrid"},
                   {"work", "prefill front"},
                   {"queue_s", parts.queue_s},
                   {"decode_s", parts.decode_s},
                   {"compute_s", parts.compute_s},
                   {"kv_bytes", meta.at("kv_bytes")},
                   {"token_bytes", 4 * parts.front_tokens}});
    hybrid_.erase(key);
    return h;
  }

  /// A rebuilt request joins the batch at the next step.
  void join(Held&& h) {
    if (config_.keep_moved_caches) moved_in_[{h.id, h.epoch}] = {h.context, h.next, h.cache};
    running_.push_back(std::move(h));
  }

  void measure_quality(const Json& c) {
    const auto id = c.at("id").get<std::uint64_t>();
    const auto epoch = c.at("epoch").get<std::int64_t>();
    const auto it = moved_in_.find({id, epoch});
    if (it == moved_in_.end()) {
      channel_.send({{"ev", "gone"}, {"id", id}, {"epoch", epoch}});
      return;
    }
    const MovedIn& m = it->second;
    // The source's KV, had the request stayed: a prefill of the same context.
    backend::KvCache source = model_.new_cache();
    backend::ForwardOptions o;
    o.logits = backend::LogitsMode::kNone;
    model_.forward(m.context, source, o);
    const auto following = c.at("following").get<std::vector<std::int32_t>>();
    const ContinuationQuality q = compare_continuations(
        model_, source, m.cache, m.next, c.at("steps").get<int>(), c.at("seed"), following);
    channel_.send({{"ev", "quality"},
                   {"id", id},
                   {"epoch", epoch},
                   {"steps", q.steps},
                   {"greedy_agreement", q.greedy_agreement},
                   {"sampled_agreement", q.sampled_agreement},
                   {"delta_nll", q.delta_nll},
                   {"text_delta_nll",
                    std::isnan(q.text_delta_nll) ? Json(nullptr) : Json(q.text_delta_nll)}});
    moved_in_.erase(it);
  }

  const NodeConfig& config_;
  const backend::Model& model_;
  Channel channel_;
  ClusterLinks links_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Json> commands_;
  std::deque<Arrival> deliveries_;  ///< moves whose rebuild is the serving loop's work
  std::deque<Held> landed_;         ///< moves rebuilt beside it
  std::map<std::pair<std::uint64_t, std::int64_t>, HybridParts> hybrid_;
  std::deque<Waiting> waiting_;  ///< admitted, waiting for their prefill
  std::deque<Waiting> resumes_;  ///< recovered, waiting for their prefill (ahead of the above)
  std::vector<Held> running_;
  std::map<std::pair<std::uint64_t, std::int64_t>, MovedIn> moved_in_;
  Agent agent_;  // last: its threads stop (in its destructor) before the rest goes
};

}  // namespace

int serve_node(const NodeConfig& config, int control_fd) {
  Node node(config, control_fd);
  return node.run();
}

}  // namespace kvshift::testbed
