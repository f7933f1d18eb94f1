#include "sim/serving/serving_model.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "cost_model/storage.hpp"

namespace kvshift::sim {

struct ServingModel::Request {
  RequestRecord rec;
  Phase phase = Phase::kQueued;
  int gpu = -1;
  std::int64_t context = 0;    ///< KV tokens held
  std::int64_t remaining = 0;  ///< output tokens still to produce
  std::int64_t reserved = 0;   ///< KV bytes reserved on its GPU
  int replica = -1;            ///< node holding its protected KV, -1 = none
  std::int64_t replicated = 0;  ///< tokens safely on the replica
  std::int64_t unstreamed = 0;  ///< tokens produced since the last stream
  std::int64_t replica_bytes = 0;
  std::uint32_t epoch = 0;     ///< bumps whenever the request loses its state
  int attempts = 0;
  bool scored = false;         ///< ProxyKV scores computed
};

struct ServingModel::Gpu {
  std::unique_ptr<GpuWorker> worker;
  int node = 0;
  std::int64_t capacity = 0;
  std::int64_t reserved = 0;
  std::set<std::uint64_t> members;  ///< requests that hold a reservation here
};

struct ServingModel::Move {
  Request* r = nullptr;
  MoveRecord rec;
  Strategy strategy = Strategy::kTokenReplay;
  std::uint32_t epoch = 0;
  int src_gpu = -1;  ///< migrations: the GPU the request leaves
  int dst_gpu = -1;
  int parts = 0;     ///< transfers still in flight
  int jobs = 0;      ///< GPU jobs still to finish
  std::int64_t available = 0;  ///< tokens whose KV (or ids) arrive
  std::int64_t tail = 0;       ///< tokens recomputed on the receiver
  std::int64_t stall_since = 0;
  std::int64_t transfers_done_ns = 0;
  std::vector<std::uint64_t> transfers;
};

namespace {

constexpr int kMaxMoveAttempts = 3;
constexpr std::int64_t kTokenIdBytes = 4;

bool lossy(Strategy s) { return s == Strategy::kRiskKv || s == Strategy::kProxyKv; }

}  // namespace

ServingModel::ServingModel(Simulator& sim, Fabric& fabric, const ScenarioSpec& spec,
                           const ServingCosts& costs, Strategy strategy, bool record_trace)
    : sim_(sim),
      fabric_(fabric),
      spec_(spec),
      costs_(costs),
      strategy_(strategy),
      workload_(spec.workload, derive_seed(spec.seed, 1), spec.duration),
      router_rng_(derive_seed(spec.seed, 2)) {
  result_.strategy = strategy_name(strategy);
  end_ns_ = from_seconds(spec.duration).ns;
  const std::size_t n = spec.cluster.nodes.size();
  node_gpus_.resize(n);
  proxy_gpus_.resize(n);
  node_up_.assign(n, true);
  node_draining_.assign(n, false);
  replica_held_.assign(n, 0);
  predictor_cached_.assign(n, 0);
  if (spec.risk_kv) {
    predictor_bytes_ = cost_model::storage(spec.model, spec.risk_kv->topology, 1,
                                           {spec.risk_kv->predictor_dtype, 1})
                           .predictor_bytes_total.count;
  }
  // HBM holds the weights and, when preloaded, the predictors; the rest is KV.
  const bool preloaded = spec.risk_kv && spec.predictors.placement == PredictorPlacement::kPreloaded;
  const std::int64_t weights =
      spec.model.parameter_count() * cost_model::dtype_bytes(spec.model.weight_dtype) +
      (preloaded ? predictor_bytes_ : 0);
  const std::int64_t epoch_cap =
      spec.protection.mode == ProtectionMode::kNone ? 64 : spec.protection.stream_every_tokens;
  for (std::size_t i = 0; i < n; ++i) {
    const NodeSpec& node = spec.cluster.nodes[i];
    if (node.kind == NodeKind::kStorage && storage_node_ < 0) storage_node_ = static_cast<int>(i);
    if (node.kind == NodeKind::kStorage && node.name == spec.protection.store) {
      storage_node_ = static_cast<int>(i);
    }
    if (node.kind == NodeKind::kStorage && node.name == spec.predictors.source) {
      predictor_source_ = static_cast<int>(i);
    }
    if (node.kind != NodeKind::kGpu) continue;
    if (predictor_source_ < 0 && node.name == spec.predictors.source) {
      predictor_source_ = static_cast<int>(i);
    }
    for (int g = 0; g < node.gpus; ++g) {
      auto gpu = std::make_unique<Gpu>();
      gpu->node = static_cast<int>(i);
      gpu->capacity = node.hbm_per_gpu.count - weights;
      if (gpu->capacity <= 0) {
        throw std::runtime_error("node " + node.name + ": the model's weights do not fit in HBM");
      }
      const int index = static_cast<int>(gpus_.size());
      gpu->worker = std::make_unique<GpuWorker>(
          sim_, *this, costs_, index, "gpu:" + node.name + "/" + std::to_string(g),
          spec.serving.max_batch, epoch_cap, result_.gpu_time,
          record_trace ? &result_.trace : nullptr);
      gpu->worker->set_batch_reconstructions(spec.predictors.batch_reconstruction);
      node_gpus_[i].push_back(index);
      if (g == 0 && spec.proxy_kv && spec.proxy_kv->placement == ProxyPlacement::kProxyGpu) {
        proxy_gpus_[i] = std::make_unique<GpuWorker>(
            sim_, *this, costs_, -1, "proxy:" + node.name, 1, 1, result_.gpu_time,
            record_trace ? &result_.trace : nullptr);
      }
      gpus_.push_back(std::move(gpu));
      set_load(*gpus_.back(), 0);
    }
  }
  if (gpus_.empty()) throw std::runtime_error("the cluster has no GPU");
  if (predictor_source_ < 0) predictor_source_ = storage_node_ >= 0 ? storage_node_ : gpus_[0]->node;
  if (spec.risk_kv) {
    if (spec.predictors.placement == PredictorPlacement::kPreloaded) {
      for (std::size_t i = 0; i < n; ++i) {
        if (!node_gpus_[i].empty()) predictor_cached_[i] = predictor_bytes_;
      }
    }
  }
}

ServingModel::~ServingModel() = default;

int ServingModel::node_of(int gpu) const { return gpus_[gpu]->node; }

// HBM accounting. A violation is a bug in this model, so it aborts the run loudly.
void ServingModel::reserve(Gpu& g, const Request& r) {
  set_load(g, g.reserved + r.reserved);
  if (g.reserved > g.capacity || !g.members.insert(r.rec.id).second) {
    throw std::logic_error("invariant: GPU " + std::to_string(g.worker->index()) +
                           " over its KV capacity or request " + std::to_string(r.rec.id) +
                           " reserved twice");
  }
}

void ServingModel::unreserve(Gpu& g, const Request& r) {
  set_load(g, g.reserved - r.reserved);
  if (g.reserved < 0 || g.members.erase(r.rec.id) != 1) {
    throw std::logic_error("invariant: request " + std::to_string(r.rec.id) +
                           " released KV it did not hold on GPU " +
                           std::to_string(g.worker->index()));
  }
}

// The router's index: GPUs that take new work, ordered by reserved share.
void ServingModel::set_load(Gpu& g, std::int64_t reserved) {
  const int index = g.worker->index();
  const auto key = [&](std::int64_t r) {
    return std::pair{static_cast<double>(r) / static_cast<double>(g.capacity), index};
  };
  const bool eligible = g.worker->up() && !node_draining_[g.node];
  by_load_.erase(key(g.reserved));
  g.reserved = reserved;
  if (eligible) by_load_.insert(key(g.reserved));
}

std::int64_t ServingModel::kv_bytes(std::int64_t tokens) const {
  return cost_model::kv_bytes(spec_.model, tokens).count;
}

std::int64_t ServingModel::protected_bytes_per_token() const {
  const std::int64_t full = kv_bytes(1);
  switch (spec_.protection.mode) {
    case ProtectionMode::kNone: return 0;
    case ProtectionMode::kFull: return full;
    case ProtectionMode::kRiskKv:
      return spec_.risk_kv ? (spec_.model.layers - spec_.risk_kv->topology.omitted_layers()) *
                                 spec_.model.kv_bytes_per_layer_token()
                           : full;
    case ProtectionMode::kProxyKv:
      return spec_.proxy_kv ? std::llround(spec_.proxy_kv->retention * static_cast<double>(full))
                            : full;
  }
  return full;
}

double ServingModel::strategy_delta_nll(Strategy s) const {
  if (s == Strategy::kRiskKv && spec_.risk_kv) return spec_.risk_kv->delta_nll;
  if (s == Strategy::kProxyKv && spec_.proxy_kv) return spec_.proxy_kv->delta_nll;
  return 0.0;
}

// ------------------------------------------------------------ run control

void ServingModel::start() {
  schedule_next_arrival();
  schedule_events();
  if (spec_.policies.rebalance.enabled) {
    sim_.schedule_after(from_seconds(spec_.policies.rebalance.check_interval),
                        [this] { rebalance_check(); });
  }
  last_counters_ = fabric_.link_counters();
  if (spec_.outputs.link_sample_interval.value > 0) {
    sim_.schedule_after(from_seconds(spec_.outputs.link_sample_interval), [this] { sample_links(); });
  }
}

RunResult ServingModel::finish() {
  result_.duration_ns = end_ns_;
  result_.events = static_cast<std::int64_t>(sim_.executed_count());
  result_.replica_bytes_held_peak = std::max(result_.replica_bytes_held_peak, replica_total_);
  for (auto& r : requests_) {
    if (r->phase != Phase::kDone) {
      r->rec.outcome = RequestOutcome::kUnfinished;
      if (r->gpu >= 0) r->rec.final_node = spec_.cluster.nodes[node_of(r->gpu)].name;
    }
    result_.requests.push_back(r->rec);
  }
  for (std::size_t i = 0; i < predictor_cached_.size(); ++i) {
    if (predictor_cached_[i] > 0) {
      ++result_.predictor_copies;
      result_.predictor_bytes_resident += predictor_cached_[i];
    }
  }
  return std::move(result_);
}

// ------------------------------------------------------------ workload and admission

void ServingModel::schedule_next_arrival() {
  std::optional<RequestArrival> a = workload_.next();
  if (!a || a->arrival_ns >= end_ns_) return;
  sim_.schedule_at(SimTime{a->arrival_ns}, [this, arrival = *a] {
    on_arrival(arrival);
    schedule_next_arrival();
  });
}

void ServingModel::on_arrival(const RequestArrival& a) {
  auto r = std::make_unique<Request>();
  r->rec.id = a.id;
  r->rec.prompt_tokens = a.prompt_tokens;
  r->rec.output_tokens = a.output_tokens;
  r->rec.arrival_ns = a.arrival_ns;
  const std::int64_t block = std::max<std::int64_t>(spec_.serving.kv_block_tokens, 1);
  const std::int64_t tokens = a.prompt_tokens + a.output_tokens;
  r->reserved = kv_bytes((tokens + block - 1) / block * block);
  Request& req = *r;
  if (requests_.size() != a.id) throw std::logic_error("request ids must be dense");
  requests_.push_back(std::move(r));
  const int gpu = pending_.empty() ? route(req.reserved, -1) : -1;
  if (gpu < 0) {
    pending_.push_back(req.rec.id);
  } else {
    start_prefill(req, gpu);
  }
}

int ServingModel::route(std::int64_t reserve, int exclude_node) {
  if (spec_.policies.router == Router::kLeastLoaded) {
    // Smallest reserved share first (ties by index); usually the first one fits.
    for (const auto& [share, index] : by_load_) {
      const Gpu& g = *gpus_[index];
      if (g.node != exclude_node && g.capacity - g.reserved >= reserve) return index;
    }
    return -1;
  }
  std::vector<int> fits;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const Gpu& g = *gpus_[i];
    if (!g.worker->up() || node_draining_[g.node] || g.node == exclude_node) continue;
    if (g.capacity - g.reserved >= reserve) fits.push_back(static_cast<int>(i));
  }
  if (fits.empty()) return -1;
  switch (spec_.policies.router) {
    case Router::kRoundRobin: {
      for (std::size_t k = 0; k < gpus_.size(); ++k) {
        const int candidate = static_cast<int>((round_robin_ + k) % gpus_.size());
        if (std::find(fits.begin(), fits.end(), candidate) != fits.end()) {
          round_robin_ = static_cast<std::size_t>(candidate) + 1;
          return candidate;
        }
      }
      return fits.front();
    }
    case Router::kRandom:
      return fits[static_cast<std::size_t>(
          router_rng_.uniform_int(0, static_cast<std::int64_t>(fits.size()) - 1))];
    case Router::kLeastLoaded:
      break;
  }
  return fits.front();
}

void ServingModel::admit_pending() {
  // Recoveries first: their requests already waited through a failure.
  for (std::size_t n = pending_recoveries_.size(); n > 0; --n) {
    auto [id, stall] = pending_recoveries_.front();
    pending_recoveries_.pop_front();
    start_move(*requests_[id], MoveTrigger::kFailure, -1, stall);
  }
  while (!pending_.empty()) {
    Request& r = *requests_[pending_.front()];
    const int gpu = route(r.reserved, -1);
    if (gpu < 0) return;
    pending_.pop_front();
    start_prefill(r, gpu);
  }
}

void ServingModel::start_prefill(Request& r, int gpu) {
  Gpu& g = *gpus_[gpu];
  reserve(g, r);
  r.gpu = gpu;
  r.phase = Phase::kPrefill;
  r.scored = false;
  const std::string& node = spec_.cluster.nodes[g.node].name;
  if (r.rec.first_node.empty()) r.rec.first_node = node;
  r.rec.final_node = node;
  if (spec_.protection.mode != ProtectionMode::kNone && r.replica < 0) {
    r.replica = pick_replica(g.node);
  }
  const std::uint32_t epoch = r.epoch;
  Request* rp = &r;
  g.worker->submit({JobKind::kPrefill, r.rec.id, r.rec.prompt_tokens,
                    [this, rp, epoch, gpu](SimTime, SimTime end) {
                      if (rp->epoch != epoch) return;
                      if (rp->rec.first_token_ns < 0) rp->rec.first_token_ns = end.ns;
                      rp->context = rp->rec.prompt_tokens;
                      rp->remaining = rp->rec.output_tokens - 1;
                      rp->phase = Phase::kDecoding;
                      if (rp->remaining <= 0) {
                        on_finished(gpu, rp->rec.id);
                        return;
                      }
                      gpus_[gpu]->worker->add_decoding({rp->rec.id, rp->context, rp->remaining});
                      if (rp->replica >= 0) stream(gpu, {{rp, rp->context}});
                      if (node_draining_[gpus_[gpu]->node]) {
                        start_move(*rp, MoveTrigger::kDrain, gpus_[gpu]->node, sim_.now().ns);
                      }
                    }});
  // ProxyKV scores come from the proxy, asynchronously to the target's prefill.
  const bool scoring = spec_.proxy_kv && (strategy_ == Strategy::kProxyKv ||
                                          strategy_ == Strategy::kAdaptive ||
                                          spec_.protection.mode == ProtectionMode::kProxyKv);
  if (scoring) {
    // On the target's GPU (a second stream sharing its compute) or on the node's proxy GPU.
    GpuWorker& scorer = spec_.proxy_kv->placement == ProxyPlacement::kProxyGpu
                            ? *proxy_gpus_[static_cast<std::size_t>(g.node)]
                            : *g.worker;
    scorer.submit({JobKind::kProxyScore, r.rec.id, r.rec.prompt_tokens,
                   [rp, epoch](SimTime, SimTime) {
                     if (rp->epoch == epoch) rp->scored = true;
                   }});
  }
}

void ServingModel::release_gpu(Request& r) {
  if (r.gpu < 0) return;
  Gpu& g = *gpus_[r.gpu];
  unreserve(g, r);
  r.gpu = -1;
}

// ------------------------------------------------------------ decoding and replicas

void ServingModel::on_decoded(int gpu, const std::vector<DecodeState>& batch, std::int64_t steps) {
  std::vector<std::pair<Request*, std::int64_t>> flush;
  for (const DecodeState& s : batch) {
    Request& r = *requests_[s.request];
    r.context = s.context;
    r.remaining = s.remaining;
    if (r.replica < 0 || s.remaining <= 0) continue;
    r.unstreamed += steps;
    if (r.unstreamed >= spec_.protection.stream_every_tokens) {
      flush.emplace_back(&r, r.unstreamed);
      r.unstreamed = 0;
    }
  }
  if (!flush.empty()) stream(gpu, flush);
}

void ServingModel::on_finished(int gpu, std::uint64_t id) {
  Request& r = *requests_[id];
  (void)gpu;
  r.phase = Phase::kDone;
  r.remaining = 0;
  r.rec.finish_ns = sim_.now().ns;
  r.rec.outcome = RequestOutcome::kCompleted;
  release_gpu(r);
  drop_replica(r);
  admit_pending();
}

void ServingModel::drop_replica(Request& r) {
  if (r.replica < 0) return;
  replica_held_[r.replica] -= r.replica_bytes;
  replica_total_ -= r.replica_bytes;
  replica_full_equiv_ -= kv_bytes(r.replicated);
  r.replica_bytes = 0;
  r.replicated = 0;
  r.replica = -1;
}

int ServingModel::pick_replica(int gpu_node) {
  const int n = static_cast<int>(spec_.cluster.nodes.size());
  auto usable = [&](int i) {
    return i != gpu_node && node_up_[i] && spec_.cluster.nodes[i].kind != NodeKind::kSwitch &&
           fabric_.path(gpu_node, i).has_value();
  };
  switch (spec_.protection.placement) {
    case ReplicaPlacement::kStorage:
      return storage_node_ >= 0 && usable(storage_node_) ? storage_node_ : -1;
    case ReplicaPlacement::kNextNode:
      for (int k = 1; k < n; ++k) {
        const int i = (gpu_node + k) % n;
        if (spec_.cluster.nodes[i].kind == NodeKind::kGpu && usable(i)) return i;
      }
      return -1;
    case ReplicaPlacement::kLeastLoaded: {
      int best = -1;
      for (int i = 0; i < n; ++i) {
        if (usable(i) && (best < 0 || replica_held_[i] < replica_held_[best])) best = i;
      }
      return best;
    }
  }
  return -1;
}

void ServingModel::stream(int gpu, const std::vector<std::pair<Request*, std::int64_t>>& items) {
  const std::int64_t per_token = protected_bytes_per_token();
  if (per_token <= 0) return;
  // One flow per replica node carries every request's new KV from this GPU.
  std::map<int, std::vector<std::pair<Request*, std::int64_t>>> by_replica;
  for (const auto& item : items) by_replica[item.first->replica].push_back(item);
  const int src = node_of(gpu);
  for (auto& [replica, group] : by_replica) {
    std::int64_t bytes = 0;
    std::vector<std::tuple<Request*, std::int64_t, std::uint32_t>> parts;
    for (auto [r, tokens] : group) {
      bytes += tokens * per_token;
      parts.emplace_back(r, tokens, r->epoch);
    }
    fabric_.send(src, replica, bytes,
                 [this, replica = replica, per_token, parts = std::move(parts)](
                     bool delivered, const std::string&) {
                   if (!delivered) return;  // the request re-streams if it still needs to
                   for (auto [r, tokens, epoch] : parts) {
                     result_.bytes.replica_stream += tokens * per_token;
                     if (r->epoch != epoch || r->phase == Phase::kDone || r->replica != replica) {
                       continue;
                     }
                     r->replicated += tokens;
                     r->replica_bytes += tokens * per_token;
                     replica_held_[replica] += tokens * per_token;
                     replica_total_ += tokens * per_token;
                     replica_full_equiv_ += kv_bytes(tokens);
                   }
                   if (replica_total_ > result_.replica_bytes_held_peak) {
                     result_.replica_bytes_held_peak = replica_total_;
                     result_.replica_bytes_full_equiv = replica_full_equiv_;
                   }
                 });
  }
}

// ------------------------------------------------------------ moves

bool ServingModel::feasible(Strategy s, bool from_replica) const {
  if (lossy(s) && spec_.policies.quality_budget &&
      strategy_delta_nll(s) > *spec_.policies.quality_budget) {
    return false;
  }
  if (s == Strategy::kRiskKv && (!spec_.risk_kv || spec_.risk_kv->topology.empty())) return false;
  if (s == Strategy::kProxyKv && !spec_.proxy_kv) return false;
  if (!from_replica || s == Strategy::kTokenReplay) return true;
  switch (spec_.protection.mode) {
    case ProtectionMode::kNone: return false;
    case ProtectionMode::kFull: return true;
    case ProtectionMode::kRiskKv: return s == Strategy::kRiskKv;
    case ProtectionMode::kProxyKv: return s == Strategy::kProxyKv;
  }
  return false;
}

double ServingModel::predict_s(Strategy s, const Request& r, int src, int dst_gpu) {
  const int dst = node_of(dst_gpu);
  const bool from_replica = r.phase != Phase::kDecoding;
  const std::int64_t available = from_replica ? r.replicated : r.context;
  const std::int64_t tail = r.context - available;
  auto transfer_s = [&](int from, std::int64_t bytes) {
    if (from < 0 || bytes <= 0) return 0.0;
    if (from == dst) return 8.0 * static_cast<double>(bytes) / spec_.gpu.host_link.value;
    const auto path = fabric_.path(from, dst);
    if (!path) return 1e30;
    return path->latency.value + 8.0 * static_cast<double>(bytes) / fabric_.available_bps(from, dst);
  };
  double t = gpus_[dst_gpu]->worker->backlog().seconds();
  const std::int64_t full = kv_bytes(available);
  switch (s) {
    case Strategy::kFullKv:
      t += transfer_s(src, full) + costs_.prefill(tail).seconds();
      break;
    case Strategy::kTokenReplay:
      t += transfer_s(src, kTokenIdBytes * r.context) + costs_.prefill(r.context).seconds();
      break;
    case Strategy::kRiskKv: {
      const std::int64_t kept = cost_model::storage(spec_.model, spec_.risk_kv->topology,
                                                    available, {})
                                    .kv_kept.count;
      double ship = transfer_s(src, kept);
      if (predictor_cached_[dst] == 0) ship = std::max(ship, transfer_s(predictor_source_, predictor_bytes_));
      t += ship + costs_.reconstruct(available, 1).seconds() + costs_.prefill(tail).seconds();
      break;
    }
    case Strategy::kProxyKv:
      t += transfer_s(src, std::llround(spec_.proxy_kv->retention * static_cast<double>(full))) +
           costs_.prefill(tail).seconds();
      break;
    case Strategy::kAdaptive: break;
  }
  return t;
}

Strategy ServingModel::choose(const Request& r, bool from_replica, int src, int dst_gpu,
                              std::string* note) {
  auto ok = [&](Strategy s) {
    if (s == Strategy::kProxyKv && !r.scored) return false;
    if (from_replica && src < 0 && s != Strategy::kTokenReplay) return false;  // no replica
    return feasible(s, from_replica);
  };
  if (strategy_ != Strategy::kAdaptive) {
    if (ok(strategy_)) return strategy_;
    const Strategy fallback = ok(Strategy::kFullKv) ? Strategy::kFullKv : Strategy::kTokenReplay;
    *note = std::string("fallback to ") + strategy_name(fallback) + ": " +
            strategy_name(strategy_) + " not possible here (protection " +
            protection_name(spec_.protection.mode) + ", quality budget or missing scores)";
    return fallback;
  }
  Strategy best = Strategy::kTokenReplay;
  double best_s = 1e300;
  for (Strategy s : {Strategy::kFullKv, Strategy::kTokenReplay, Strategy::kRiskKv,
                     Strategy::kProxyKv}) {
    if (!ok(s)) continue;
    const double t = predict_s(s, r, src, dst_gpu);
    if (t < best_s) {
      best_s = t;
      best = s;
    }
  }
  return best;
}

void ServingModel::start_move(Request& r, MoveTrigger trigger, int from_node,
                              std::int64_t stall_since) {
  if (r.phase == Phase::kDone || moves_.count(r.rec.id)) return;
  const bool from_replica = trigger == MoveTrigger::kFailure;
  const int dst_gpu = route(r.reserved, from_node);
  if (dst_gpu < 0) {
    if (from_replica) pending_recoveries_.emplace_back(r.rec.id, stall_since);
    return;  // a migration with nowhere to go simply does not happen
  }
  int src = from_node;
  if (from_replica) src = r.replica >= 0 && node_up_[r.replica] ? r.replica : -1;
  int src_gpu = -1;
  if (!from_replica) {
    src_gpu = r.gpu;
    std::optional<DecodeState> st = gpus_[src_gpu]->worker->remove_decoding(r.rec.id);
    if (!st) return;  // not decoding (still in prefill): it moves after its prefill
    r.unstreamed += st->context - r.context;
    r.context = st->context;
    r.remaining = st->remaining;
  }
  std::string note;
  const Strategy s = choose(r, from_replica, src, dst_gpu, &note);
  Gpu& dst = *gpus_[dst_gpu];
  reserve(dst, r);
  r.phase = Phase::kMoving;

  auto m = std::make_unique<Move>();
  m->r = &r;
  m->strategy = s;
  m->epoch = r.epoch;
  m->src_gpu = src_gpu;
  m->dst_gpu = dst_gpu;
  m->stall_since = stall_since;
  m->available = from_replica ? r.replicated : r.context;
  if (s == Strategy::kTokenReplay) m->available = 0;
  m->tail = r.context - m->available;
  m->rec.request = r.rec.id;
  m->rec.trigger = trigger;
  m->rec.from = from_node >= 0 ? spec_.cluster.nodes[from_node].name : "";
  m->rec.to = spec_.cluster.nodes[dst.node].name;
  m->rec.strategy = strategy_name(s);
  m->rec.context_tokens = r.context;
  m->rec.available_tokens = s == Strategy::kTokenReplay ? r.context : m->available;
  m->rec.tail_tokens = m->tail;
  m->rec.source = src >= 0 ? spec_.cluster.nodes[src].name : "";
  m->rec.start_ns = sim_.now().ns;
  m->rec.delta_nll = strategy_delta_nll(s);
  m->rec.note = note;
  Move& move = *m;
  moves_[r.rec.id] = std::move(m);

  const int dst_node = dst.node;
  const std::int64_t full = kv_bytes(move.available);
  switch (s) {
    case Strategy::kFullKv:
      transfer_part(move, src, dst_node, full, &BytesByKind::kv);
      break;
    case Strategy::kTokenReplay:
      transfer_part(move, src, dst_node, kTokenIdBytes * r.context, &BytesByKind::tokens);
      break;
    case Strategy::kRiskKv: {
      const std::int64_t kept =
          cost_model::storage(spec_.model, spec_.risk_kv->topology, move.available, {}).kv_kept.count;
      transfer_part(move, src, dst_node, kept, &BytesByKind::kv);
      result_.predictor_uses[spec_.cluster.nodes[dst_node].name] += 1;
      if (predictor_cached_[dst_node] == 0) {
        transfer_part(move, predictor_source_, dst_node, predictor_bytes_, &BytesByKind::predictors);
      }
      break;
    }
    case Strategy::kProxyKv:
      transfer_part(move, src, dst_node,
                    std::llround(spec_.proxy_kv->retention * static_cast<double>(full)),
                    &BytesByKind::kv);
      break;
    case Strategy::kAdaptive: break;
  }
  if (move.parts == 0) on_transfers_done(move);
}

void ServingModel::transfer_part(Move& m, int src, int dst, std::int64_t bytes,
                                 std::int64_t BytesByKind::*kind) {
  if (src < 0 || bytes <= 0) return;  // nothing to ship (ids held by the router)
  const std::uint64_t id = m.r->rec.id;
  const std::uint32_t epoch = m.epoch;
  auto done = [this, id, epoch, bytes, kind](bool delivered, const std::string& reason) {
    auto it = moves_.find(id);
    if (it == moves_.end() || it->second->epoch != epoch) return;
    Move& mv = *it->second;
    if (!delivered) {
      fail_move(mv, "transfer failed: " + reason);
      return;
    }
    result_.bytes.*kind += bytes;
    if (kind == &BytesByKind::predictors) {
      const int node = gpus_[mv.dst_gpu]->node;
      const auto budget = spec_.predictors.hbm_budget;
      if (!budget || budget->count >= predictor_bytes_) predictor_cached_[node] = predictor_bytes_;
      mv.rec.predictor_bytes += bytes;
    } else if (kind == &BytesByKind::tokens) {
      mv.rec.token_bytes += bytes;
    } else {
      mv.rec.kv_bytes += bytes;
    }
    if (--mv.parts == 0) on_transfers_done(mv);
  };
  ++m.parts;
  if (src == dst) {
    // Same node: the bytes cross the host link, not the network.
    const SimTime t = from_seconds(8.0 * static_cast<double>(bytes) / spec_.gpu.host_link.value);
    sim_.schedule_after(t, [done] { done(true, ""); });
    return;
  }
  m.transfers.push_back(fabric_.send(src, dst, bytes, done));
}

void ServingModel::on_transfers_done(Move& m) {
  m.transfers_done_ns = sim_.now().ns;
  m.rec.transfer_ns = m.transfers_done_ns - m.rec.start_ns;
  Request& r = *m.r;
  if (m.src_gpu >= 0) {  // a migration frees its source once the bytes have left
    Gpu& src = *gpus_[m.src_gpu];
    unreserve(src, r);
    m.src_gpu = -1;
  }
  GpuWorker& worker = *gpus_[m.dst_gpu]->worker;
  const std::uint64_t id = r.rec.id;
  const std::uint32_t epoch = m.epoch;
  auto job_done = [this, id, epoch](SimTime start, SimTime end) {
    auto it = moves_.find(id);
    if (it == moves_.end() || it->second->epoch != epoch) return;
    Move& mv = *it->second;
    mv.rec.compute_ns += (end - start).ns;
    mv.rec.queue_ns += std::max<std::int64_t>(0, start.ns - mv.transfers_done_ns);
    if (--mv.jobs == 0) finish_move(mv);
  };
  if (m.strategy == Strategy::kRiskKv && m.available > 0) {
    ++m.jobs;
    worker.submit({JobKind::kReconstruct, id, m.available, job_done});
  }
  if (m.tail > 0) {
    ++m.jobs;
    worker.submit({JobKind::kReplay, id, m.tail, job_done});
  }
  if (m.jobs == 0) finish_move(m);
}

void ServingModel::finish_move(Move& m) {
  Request& r = *m.r;
  const int dst_node = gpus_[m.dst_gpu]->node;
  r.gpu = m.dst_gpu;
  r.phase = Phase::kDecoding;
  r.attempts = 0;
  r.rec.moves += 1;
  r.rec.final_node = spec_.cluster.nodes[dst_node].name;
  m.rec.end_ns = sim_.now().ns;
  m.rec.stall_ns = m.rec.end_ns - m.stall_since;
  result_.moves.push_back(m.rec);
  if (r.replica == dst_node) {  // a request cannot be its own replica
    drop_replica(r);
    r.replica = pick_replica(dst_node);
  }
  if (r.replica >= 0 && r.replicated < r.context) r.unstreamed = r.context - r.replicated;
  gpus_[m.dst_gpu]->worker->add_decoding({r.rec.id, r.context, r.remaining});
  moves_.erase(r.rec.id);  // m is gone from here on
  admit_pending();
}

void ServingModel::fail_move(Move& m, const std::string& reason) {
  Request& r = *m.r;
  for (std::uint64_t t : m.transfers) fabric_.cancel(t);
  m.rec.ok = false;
  m.rec.end_ns = sim_.now().ns;
  m.rec.stall_ns = m.rec.end_ns - m.stall_since;
  m.rec.note = reason;
  result_.moves.push_back(m.rec);
  Gpu& dst = *gpus_[m.dst_gpu];
  if (dst.worker->up()) {
    unreserve(dst, r);
  }
  const std::int64_t stall = m.stall_since;
  const int src_gpu = m.src_gpu;
  moves_.erase(r.rec.id);
  if (src_gpu >= 0 && gpus_[src_gpu]->worker->up()) {
    // A migration that failed on the way: the source still holds the KV; carry on there.
    r.gpu = src_gpu;
    r.phase = Phase::kDecoding;
    gpus_[src_gpu]->worker->add_decoding({r.rec.id, r.context, r.remaining});
    return;
  }
  r.gpu = -1;
  ++r.epoch;
  if (++r.attempts >= kMaxMoveAttempts) {
    fail_request(r, "gave up after " + std::to_string(kMaxMoveAttempts) + " failed moves: " + reason);
    return;
  }
  // The KV that was on its way is gone; recover from the replica (or by replay).
  r.phase = Phase::kMoving;
  sim_.schedule_after(SimTime{}, [this, &r, stall, epoch = r.epoch] {
    if (r.epoch == epoch && r.phase == Phase::kMoving) {
      start_move(r, MoveTrigger::kFailure, -1, stall);
    }
  });
}

void ServingModel::fail_request(Request& r, const std::string& reason) {
  release_gpu(r);
  r.phase = Phase::kDone;
  r.rec.outcome = RequestOutcome::kFailed;
  r.rec.failure_reason = reason;
  r.rec.finish_ns = sim_.now().ns;
  drop_replica(r);
  admit_pending();
}

// ------------------------------------------------------------ events

void ServingModel::schedule_events() {
  auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < spec_.cluster.nodes.size(); ++i) {
      if (spec_.cluster.nodes[i].name == name) return static_cast<int>(i);
    }
    throw std::logic_error("event names unknown node " + name);
  };
  for (const EventSpec& e : spec_.events) {
    const SimTime at = from_seconds(e.at);
    if (at.ns >= end_ns_) continue;
    switch (e.kind) {
      case EventKind::kNodeFailure: {
        const int node = index_of(e.node);
        const SimTime delay = from_seconds(e.detection_delay);
        sim_.schedule_at(at, [this, node, delay] { node_failure(node, delay); });
        if (e.repair_after) {
          sim_.schedule_at(at + from_seconds(*e.repair_after), [this, node] { node_repair(node); });
        }
        break;
      }
      case EventKind::kNodeRepair: {
        const int node = index_of(e.node);
        sim_.schedule_at(at, [this, node] { node_repair(node); });
        break;
      }
      case EventKind::kDrain: {
        const int node = index_of(e.node);
        sim_.schedule_at(at, [this, node] { drain(node); });
        break;
      }
      case EventKind::kLinkDegrade: {
        std::optional<double> bw, lat;
        if (e.bandwidth) bw = e.bandwidth->value;
        if (e.latency) lat = e.latency->value;
        sim_.schedule_at(at, [this, link = e.link, bw, lat] { fabric_.degrade_link(link, bw, lat); });
        if (e.repair_after) {
          sim_.schedule_at(at + from_seconds(*e.repair_after),
                           [this, link = e.link] { fabric_.repair_link(link); });
        }
        break;
      }
      case EventKind::kLinkFailure:
        sim_.schedule_at(at, [this, link = e.link] { fabric_.fail_link(link); });
        if (e.repair_after) {
          sim_.schedule_at(at + from_seconds(*e.repair_after),
                           [this, link = e.link] { fabric_.repair_link(link); });
        }
        break;
      case EventKind::kLinkRepair:
        sim_.schedule_at(at, [this, link = e.link] { fabric_.repair_link(link); });
        break;
    }
  }
}

void ServingModel::node_failure(int node, SimTime detection_delay) {
  if (!node_up_[node]) return;
  node_up_[node] = false;
  predictor_cached_[node] = 0;
  const std::int64_t now = sim_.now().ns;
  std::vector<std::uint64_t> lost;
  if (proxy_gpus_[node]) proxy_gpus_[node]->fail();  // scores in flight are lost
  for (int g : node_gpus_[node]) {
    for (std::uint64_t id : gpus_[g]->worker->fail()) lost.push_back(id);
    for (std::uint64_t id : gpus_[g]->members) lost.push_back(id);
    set_load(*gpus_[g], 0);  // after fail(): the GPU leaves the router's index
    gpus_[g]->members.clear();
  }
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  // Moves that were heading to (or leaving) this node fail.
  std::vector<std::uint64_t> broken;
  for (auto& [id, m] : moves_) {
    if (gpus_[m->dst_gpu]->node == node || (m->src_gpu >= 0 && gpus_[m->src_gpu]->node == node)) {
      broken.push_back(id);
    }
  }
  for (std::uint64_t id : broken) {
    auto it = moves_.find(id);
    if (it != moves_.end()) fail_move(*it->second, "node " + spec_.cluster.nodes[node].name + " failed");
  }
  // Replicas held here are gone: their requests re-stream to a new replica.
  for (auto& r : requests_) {
    if (r->replica == node && r->phase != Phase::kDone) drop_replica(*r);
  }
  fabric_.fail_node(node);
  for (std::uint64_t id : lost) {
    Request& r = *requests_[id];
    if (r.phase == Phase::kDone || moves_.count(id) ||
        std::find(broken.begin(), broken.end(), id) != broken.end()) {
      continue;
    }
    r.gpu = -1;
    ++r.epoch;
    if (r.phase == Phase::kPrefill || r.phase == Phase::kQueued) {
      r.phase = Phase::kQueued;  // nothing computed yet worth saving: start over
      pending_.push_front(id);
      continue;
    }
    r.phase = Phase::kMoving;
    sim_.schedule_after(detection_delay, [this, &r, node, now, epoch = r.epoch] {
      if (r.epoch == epoch && r.phase == Phase::kMoving) {
        start_move(r, MoveTrigger::kFailure, node, now);
      }
    });
  }
  for (auto& r : requests_) {
    if (r->phase != Phase::kDone && r->replica < 0 && r->gpu >= 0 &&
        spec_.protection.mode != ProtectionMode::kNone) {
      r->replica = pick_replica(node_of(r->gpu));
      r->unstreamed = r->context;
    }
  }
  admit_pending();
}

void ServingModel::node_repair(int node) {
  if (node_up_[node]) return;
  node_up_[node] = true;
  node_draining_[node] = false;
  if (proxy_gpus_[node]) proxy_gpus_[node]->repair();
  for (int g : node_gpus_[node]) {
    gpus_[g]->worker->repair();
    set_load(*gpus_[g], gpus_[g]->reserved);
  }
  fabric_.repair_node(node);
  if (spec_.risk_kv && spec_.predictors.placement == PredictorPlacement::kPreloaded &&
      !node_gpus_[node].empty()) {
    predictor_cached_[node] = predictor_bytes_;
  }
  admit_pending();
}

void ServingModel::drain(int node) {
  if (!node_up_[node]) return;
  node_draining_[node] = true;
  for (int g : node_gpus_[node]) set_load(*gpus_[g], gpus_[g]->reserved);
  const std::int64_t now = sim_.now().ns;
  for (int g : node_gpus_[node]) {
    const std::vector<std::uint64_t> members(gpus_[g]->members.begin(), gpus_[g]->members.end());
    for (std::uint64_t id : members) {
      Request& r = *requests_[id];
      if (r.phase == Phase::kDecoding) start_move(r, MoveTrigger::kDrain, node, now);
    }
  }
}

void ServingModel::rebalance_check() {
  const RebalanceSpec& rb = spec_.policies.rebalance;
  for (std::size_t g = 0; g < gpus_.size(); ++g) {
    Gpu& gpu = *gpus_[g];
    if (!gpu.worker->up() || static_cast<double>(gpu.reserved) <=
                                 rb.threshold * static_cast<double>(gpu.capacity)) {
      continue;
    }
    Request* biggest = nullptr;
    for (std::uint64_t id : gpu.members) {
      Request& r = *requests_[id];
      if (r.phase == Phase::kDecoding && (!biggest || r.context > biggest->context)) biggest = &r;
    }
    if (biggest) start_move(*biggest, MoveTrigger::kRebalance, gpu.node, sim_.now().ns);
  }
  if (sim_.now().ns + from_seconds(rb.check_interval).ns < end_ns_) {
    sim_.schedule_after(from_seconds(rb.check_interval), [this] { rebalance_check(); });
  }
}

void ServingModel::sample_links() {
  const SimTime interval = from_seconds(spec_.outputs.link_sample_interval);
  std::vector<LinkCounter> now = fabric_.link_counters();
  // Utilisation is the allocated share of capacity at the sample instant (exact);
  // bytes are those settled since the last sample (the network settles a flow's
  // bytes when its rate changes or it ends, so they can lag).
  for (std::size_t i = 0; i < now.size() && i < last_counters_.size(); ++i) {
    const std::int64_t bytes = now[i].bytes - last_counters_[i].bytes;
    // A capacity change at this very instant is re-shared by an event at the same
    // time, possibly after this one: until then the allocation may exceed capacity.
    const double util = now[i].capacity_bps > 0
                            ? std::min(1.0, now[i].allocated_bps / now[i].capacity_bps)
                            : 0.0;
    result_.link_samples.push_back({sim_.now().ns, now[i].name, util, bytes});
  }
  last_counters_ = std::move(now);
  if (sim_.now().ns + interval.ns <= end_ns_) {
    sim_.schedule_after(interval, [this] { sample_links(); });
  }
}

}  // namespace kvshift::sim
