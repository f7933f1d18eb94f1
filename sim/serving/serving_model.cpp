// ServingModel: construction, run control, arrivals, routing and admission.
#include "sim/serving/serving_model_internal.hpp"

#include <algorithm>
#include <stdexcept>

#include "cost_model/storage.hpp"

namespace kvshift::sim {

using namespace serving_detail;

namespace {

// The deployments' parts of the arrivals (the workload's draw).
std::vector<DeploymentDraw> draws(const SimulationSpec& spec) {
  std::vector<DeploymentDraw> out;
  for (const DeploymentSpec& d : spec.deployments)
    out.push_back({d.share, d.prompt_tokens, d.output_tokens});
  return out;
}

// The deployment that serves pool `pool` (0 with one model).
int deployment_serving(const SimulationSpec& spec, int pool) {
  for (std::size_t d = 0; d < spec.deployments.size(); ++d) {
    const std::vector<int>& pools = spec.deployments[d].pools;
    if (std::find(pools.begin(), pools.end(), pool) != pools.end()) return static_cast<int>(d);
  }
  if (!spec.deployments.empty()) throw std::logic_error("a pool serves no deployment");
  return 0;
}

}  // namespace

ServingModel::ServingModel(Simulator& sim, Fabric& fabric, const SimulationSpec& spec,
                           const ServingCosts& costs, Strategy strategy, RecordOptions records,
                           std::vector<const ServingCosts*> pool_costs)
    : sim_(sim),
      fabric_(fabric),
      spec_(spec),
      costs_(costs),
      pool_costs_(std::move(pool_costs)),
      strategy_(strategy),
      policy_(make_move_policy(strategy)),
      records_(records),
      workload_(spec.workload, derive_seed(spec.seed, 1), spec.duration, draws(spec)),
      router_(spec.pools.empty() ? spec.policies.router : spec.pools.front().router,
              derive_seed(spec.seed, 2)),
      deployments_(spec.deployments.empty() ? 1 : spec.deployments.size()),
      engine_(move_methods(spec).engine) {
  result_.strategy = strategy_name(strategy);
  end_ns_ = from_seconds(spec.duration).ns;
  make_move_engine();
  const std::size_t n = spec.cluster.nodes.size();
  node_deployment_.assign(n, -1);
  std::vector<DeploymentSpec> served = served_deployments(spec);
  const auto budget = spec.predictors.hbm_budget;
  for (std::size_t d = 0; d < deployments_.size(); ++d) {
    Deployment& dep = deployments_[d];
    dep.spec = std::move(served[d]);
    dep.methods = move_methods(spec, dep.spec);
    dep.predictor_bytes = cost_model::predictor_bytes(dep.methods).count;
    dep.predictors =
        std::make_unique<PredictorCache>(n, !budget || budget->count >= dep.predictor_bytes);
    // Pools: its arrivals prefill in its prefill pools (in its decode pools when the policy
    // prefills where it decodes: no disaggregation); they decode in the others.
    PoolSet prefill = 0, decode = 0;
    for (int p : dep.spec.pools) {
      (spec.pools[static_cast<std::size_t>(p)].role == PoolRole::kPrefill ? prefill : decode) |=
          PoolSet{1} << p;
    }
    if (!spec.pools.empty()) {
      dep.decode_pools = decode;
      dep.arrival_pools = prefill == 0 || policy_->prefills_where_it_decodes() ? decode : prefill;
    }
    if (!spec.deployments.empty()) result_.deployments.push_back({dep.spec.name, {}});
  }
  for (std::size_t p = 1; p < spec.pools.size(); ++p) router_.add_pool(spec.pools[p].router);
  node_gpus_.resize(n);
  proxy_gpus_.resize(n);
  host_tiers_.resize(n);
  ssd_tiers_.resize(n);
  ssd_io_.resize(n);
  node_up_.assign(n, true);
  node_draining_.assign(n, false);
  const std::int64_t epoch_cap =
      spec.protection.mode == ProtectionMode::kNone ? 64 : spec.protection.stream_every_tokens;
  for (std::size_t i = 0; i < n; ++i) {
    const ClusterNode& node = spec.cluster.nodes[i];
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
    const int d = deployment_serving(spec, node.pool);
    node_deployment_[i] = d;
    if (d != 0 && &costs_of(static_cast<int>(i)) == &costs_) {  // costs_ prices deployment 0
      throw std::logic_error("node " + node.name + " serves deployment " + std::to_string(d) +
                             " but has no costs of its own model");
    }
    const Deployment& dep = deployments_[static_cast<std::size_t>(d)];
    // HBM holds the weights and, when preloaded, the predictors; the rest is KV.
    const bool preloaded =
        dep.spec.risk_kv && spec.predictors.placement == PredictorPlacement::kPreloaded;
    const std::int64_t weights =
        dep.spec.model.parameter_count() * cost_model::dtype_bytes(dep.spec.model.weight_dtype) +
        (preloaded ? dep.predictor_bytes : 0);
    const std::int64_t prefix_block = block_bytes(d, spec.serving.prefix_cache.block_tokens);
    for (int g = 0; g < node.gpu_count; ++g) {
      Gpu& gpu = gpus_.emplace_back();
      gpu.node = static_cast<int>(i);
      const std::int64_t capacity = node.hbm_per_gpu.count - weights;
      if (capacity <= 0) {
        throw std::runtime_error("node " + node.name + ": the weights of " + dep.spec.model.name +
                                 " do not fit in HBM");
      }
      const int index = router_.add_gpu(static_cast<int>(i), capacity, node.pool);
      gpu.worker = std::make_unique<GpuWorker>(sim_, *this, costs_of(static_cast<int>(i)), index,
                                               "gpu:" + node.name + "/" + std::to_string(g),
                                               spec.serving.max_batch, epoch_cap, result_.gpu_time,
                                               records_.trace ? &result_.trace : nullptr);
      gpu.worker->set_batch_reconstructions(spec.predictors.batch_reconstruction);
      gpu.worker->set_prefill_chunk(spec.serving.prefill_chunk_tokens);
      gpu.worker->set_growth_booking(spec.serving.preemption.has_value());
      if (spec.serving.prefix_cache.enabled)
        gpu.cache = std::make_unique<PrefixCache>(prefix_block);
      node_gpus_[i].push_back(index);
      if (g == 0 && spec.serving.prefix_cache.enabled && spec.serving.prefix_cache.host_offload) {
        host_tiers_[i] = std::make_unique<PrefixCache>(prefix_block);
        if (spec.serving.prefix_cache.ssd_tier) {
          ssd_tiers_[i] = std::make_unique<PrefixCache>(prefix_block);
        }
      }
      if (g == 0 && dep.spec.proxy_kv &&
          dep.spec.proxy_kv->placement == ProxyPlacement::kProxyGpu) {
        proxy_gpus_[i] = std::make_unique<GpuWorker>(sim_, *this, costs_of(static_cast<int>(i)), -1,
                                                     "proxy:" + node.name, 1, 1, result_.gpu_time,
                                                     records_.trace ? &result_.trace : nullptr);
      }
    }
  }
  if (gpus_.empty()) throw std::runtime_error("the cluster has no GPU");
  if (spec.serving.preemption) router_.set_watermark(spec.serving.preemption->watermark);
  if (const auto& tier = spec.serving.prefix_cache.storage_tier;
      tier && spec.serving.prefix_cache.enabled) {
    for (std::size_t i = 0; i < n; ++i) {
      if (spec.cluster.nodes[i].name == tier->node) storage_tier_node_ = static_cast<int>(i);
    }
    if (storage_tier_node_ < 0)
      throw std::logic_error("storage tier on unknown node " + tier->node);
    storage_tier_ =
        std::make_unique<PrefixCache>(block_bytes(0, spec.serving.prefix_cache.block_tokens));
  }
  if (predictor_source_ < 0) predictor_source_ = storage_node_ >= 0 ? storage_node_ : gpus_[0].node;
  std::vector<NodeKind> kinds;
  std::vector<std::int64_t> room;  // host DRAM of gpu nodes, capacity of storage nodes
  for (const ClusterNode& node : spec.cluster.nodes) {
    kinds.push_back(node.kind);
    room.push_back(node.host_memory.count);
  }
  replicas_ = std::make_unique<ReplicaStore>(std::move(kinds), std::move(room),
                                             spec.protection.placement, storage_node_);
  if (spec.predictors.placement == PredictorPlacement::kPreloaded) {
    for (std::size_t i = 0; i < n; ++i) {
      const int d = node_deployment_[i];
      if (d >= 0 && deployments_[static_cast<std::size_t>(d)].spec.risk_kv) {
        deployments_[static_cast<std::size_t>(d)].predictors->preload(static_cast<int>(i));
      }
    }
  }
  result_.gpus = static_cast<std::int64_t>(gpus_.size());
  for (auto& g : gpus_) g.worker->set_horizon(SimTime{end_ns_});
  if (records_.sink) records_.sink->begin_run(result_.strategy);
}

ServingModel::~ServingModel() = default;

int ServingModel::node_of(int gpu) const { return gpus_[gpu].node; }

const ServingCosts& ServingModel::costs_of(int node) const {
  const auto pool = static_cast<std::size_t>(spec_.cluster.nodes[node].pool);
  return pool < pool_costs_.size() && pool_costs_[pool] ? *pool_costs_[pool] : costs_;
}

bool ServingModel::on_prefill_pool(int gpu) const {
  const int pool = spec_.cluster.nodes[node_of(gpu)].pool;
  return !spec_.pools.empty() && spec_.pools[pool].role == PoolRole::kPrefill;
}

// HBM bookings live in the router, which checks them.
void ServingModel::reserve(int gpu, const Request& r, std::int64_t bytes) {
  router_.reserve(gpu, r.rec.id, bytes);
  fit_cache(gpu);  // the room it took may have held unpinned prefix blocks
}

void ServingModel::reserve(int gpu, const Request& r) { reserve(gpu, r, r.reserved); }

void ServingModel::unreserve(int gpu, Request& r) {
  router_.release(gpu, r.rec.id);
  if (r.pin_gpu == gpu) unpin_prefix(r);
}

void ServingModel::update_open(int gpu) {
  router_.set_open(gpu, gpus_[gpu].worker->up() && !node_draining_[gpus_[gpu].node]);
}

std::int64_t ServingModel::kv_bytes(int d, std::int64_t tokens) const {
  return cost_model::kv_bytes(deployments_[static_cast<std::size_t>(d)].spec.model, tokens).count;
}

std::int64_t ServingModel::block_bytes(int d, std::int64_t tokens) const {
  const std::int64_t block = std::max<std::int64_t>(spec_.serving.kv_block_tokens, 1);
  return kv_bytes(d, (tokens + block - 1) / block * block);
}

ServingModel::ProtectedKv ServingModel::protected_kv(int d) const {
  const DeploymentSpec& dep = deployments_[static_cast<std::size_t>(d)].spec;
  const int layers = dep.model.layers;
  switch (spec_.protection.mode) {
    case ProtectionMode::kNone:
      return {0, 1};
    case ProtectionMode::kFull:
      return {layers, 1};
    case ProtectionMode::kRiskKv:
      return {dep.risk_kv ? layers - dep.risk_kv->omission.omitted_layers() : layers, 1};
    case ProtectionMode::kProxyKv:
      return {layers, dep.proxy_kv ? dep.proxy_kv->retention : 1};
  }
  return {layers, 1};
}

std::int64_t ServingModel::protected_bytes_per_token(int d) const {
  const ProtectedKv p = protected_kv(d);
  const std::int64_t bytes =
      p.layers * deployments_[static_cast<std::size_t>(d)].spec.model.kv_bytes_per_layer_token();
  return p.token_share == 1 ? bytes : std::llround(p.token_share * static_cast<double>(bytes));
}

// ------------------------------------------------------------ run control

void ServingModel::start() {
  schedule_next_arrival();
  schedule_events();
  if (spec_.policies.rebalance.enabled) {
    sim_.schedule_after(from_seconds(spec_.policies.rebalance.check_interval),
                        [this] { rebalance_check(); });
  }
  for (const LinkCounter& c : fabric_.link_counters()) last_link_bytes_.push_back(c.bytes);
  if (spec_.link_sample_interval.value > 0) {
    sim_.schedule_after(from_seconds(spec_.link_sample_interval), [this] { sample_links(); });
  }
}

RunResult ServingModel::finish() {
  result_.duration_ns = end_ns_;
  result_.events = static_cast<std::int64_t>(sim_.executed_count());
  result_.replica_bytes_held_peak = replicas_->peak();
  result_.replica_room_peak_share = replicas_->peak_share();
  result_.replica_bytes_full_equiv = replicas_->peak_full_equiv();
  close_moves();
  for (Request& r : requests_) {
    if (r.phase != Phase::kDone) {
      r.rec.outcome = RequestOutcome::kUnfinished;
      if (r.gpu >= 0) r.rec.final_node = spec_.cluster.nodes[node_of(r.gpu)].name;
      if (r.rec.reason.empty()) r.rec.reason = unfinished_reason(r);
      if (!can_be_served(r)) {
        r.rec.outcome = RequestOutcome::kFailed;
        r.rec.reason =
            "every GPU of its deployment was down at the end of the run (" + r.rec.reason + ")";
      }
    }
    record(r.rec);
  }
  requests_.clear();
  for (const auto& g : gpus_) {
    if (g.cache) {
      result_.prefix_cache.resident_bytes +=
          static_cast<std::int64_t>(g.cache->blocks()) * g.cache->block_bytes();
    }
  }
  for (const Gpu& g : gpus_) {
    result_.host_links.busy_ns += g.to_gpu.busy_ns() + g.from_gpu.busy_ns();
    result_.host_links.waited_ns += g.to_gpu.waited_ns() + g.from_gpu.waited_ns();
  }
  for (const CopyQueue& q : ssd_io_) result_.host_links.ssd_waited_ns += q.waited_ns();
  result_.prefix_cache.host.resident_bytes = host_tier_bytes_;
  result_.prefix_cache.ssd.resident_bytes = ssd_tier_bytes_;
  result_.prefix_cache.storage.resident_bytes = storage_tier_bytes_;
  for (const Deployment& d : deployments_) {
    result_.predictor_copies += d.predictors->copies();
    result_.predictor_bytes_resident += d.predictors->copies() * d.predictor_bytes;
  }
  return std::move(result_);
}

// ------------------------------------------------------------ records

ServingModel::Request* ServingModel::find_request(std::uint64_t id) {
  if (id < first_live_ || id - first_live_ >= requests_.size()) return nullptr;
  return &requests_[id - first_live_];
}

void ServingModel::retire_done() {
  while (!requests_.empty() && requests_.front().phase == Phase::kDone) {
    record(requests_.front().rec);
    requests_.pop_front();
    ++first_live_;
  }
}

void ServingModel::record(const RequestRecord& r) {
  result_.tally.add(r);
  if (!result_.deployments.empty()) {
    result_.deployments[static_cast<std::size_t>(r.deployment)].tally.add(r);
  }
  if (records_.sink) records_.sink->request(r);
  if (records_.keep) result_.requests.push_back(r);
}

void ServingModel::record(const MoveRecord& m) {
  result_.tally.add(m);
  if (!result_.deployments.empty()) {
    result_.deployments[static_cast<std::size_t>(m.deployment)].tally.add(m);
  }
  if (records_.sink) records_.sink->move(m);
  if (records_.keep) result_.moves.push_back(m);
}

// ------------------------------------------------------------ workload and admission

void ServingModel::schedule_next_arrival() {
  next_arrival_ = workload_.next();
  if (!next_arrival_ || next_arrival_->arrival_ns >= end_ns_) return;
  // One arrival is pending at a time: the event names only the model (fits inline).
  sim_.schedule_at(SimTime{next_arrival_->arrival_ns}, [this] {
    on_arrival(*next_arrival_);
    schedule_next_arrival();
  });
}

void ServingModel::on_arrival(const RequestArrival& a) {
  retire_done();
  if (first_live_ + requests_.size() != a.id) throw std::logic_error("request ids must be dense");
  Request& req = requests_.emplace_back();
  req.rec.id = a.id;
  req.rec.prompt_tokens = a.prompt_tokens;
  req.rec.output_tokens = a.output_tokens;
  req.rec.arrival_ns = a.arrival_ns;
  req.rec.deployment = a.deployment;
  // With preemption the prompt is booked now and the rest block by block as it decodes.
  req.reserved =
      block_bytes(a.deployment, a.prompt_tokens + (spec_.serving.preemption ? 0 : a.output_tokens));
  if (spec_.serving.prefix_cache.enabled) req.prefix_keys = prefix_keys(a);
  std::deque<std::uint64_t>& pending = deployment(req).pending;
  const int gpu = pending.empty() ? route_arrival(req) : -1;
  if (gpu < 0) {
    pending.push_back(req.rec.id);
  } else {
    start_prefill(req, gpu);
  }
}

void ServingModel::admit_pending() {
  // Recoveries first: their requests already waited through a failure. Then handoffs:
  // they hold prefill HBM that new arrivals wait for. A move that fails at once (a failed
  // path) ends inside start_move and admits again from there, so the queues may shrink
  // under these loops.
  for (std::size_t n = pending_recoveries_.size(); n > 0 && !pending_recoveries_.empty(); --n) {
    const PendingRecovery p = pending_recoveries_.front();
    pending_recoveries_.pop_front();
    start_move(request(p.request), MoveTrigger::kFailure, p.from_node, p.stall_since);
  }
  for (std::size_t n = pending_handoffs_.size(); n > 0 && !pending_handoffs_.empty(); --n) {
    const auto [id, epoch] = pending_handoffs_.front();
    pending_handoffs_.pop_front();
    Request* r = find_request(id);
    if (r && r->epoch == epoch && r->phase == Phase::kHandingOff) try_handoff(*r);
  }
  // Then preempted requests, before new arrivals (vLLM's order). Each deployment's
  // arrivals wait in their own line: one model's full pools never hold up another's.
  if (!preempted_.empty()) resume_preempted();
  for (Deployment& d : deployments_) {
    while (!d.pending.empty()) {
      Request& r = request(d.pending.front());
      const int gpu = route_arrival(r);
      if (gpu < 0) break;
      d.pending.pop_front();
      start_prefill(r, gpu);
    }
  }
}

void ServingModel::start_prefill(Request& r, int gpu) {
  Gpu& g = gpus_[gpu];
  // A prefill-pool GPU holds only the prompt's KV, until the handoff lands.
  const bool handoff = on_prefill_pool(gpu);
  const std::int64_t booked =
      handoff ? block_bytes(r.rec.deployment, r.rec.prompt_tokens) : r.reserved;
  // Prefix caching: reuse the longest cached run of the prompt's blocks, prefill the rest.
  SimTime load;
  std::size_t fetch = 0;
  const std::int64_t cached = reuse_prefix(r, gpu, load, fetch);
  reserve(gpu, r, booked - pinned_bytes(r));
  r.gpu = gpu;
  r.phase = Phase::kPrefill;
  r.scored = false;
  const std::string& node = spec_.cluster.nodes[g.node].name;
  if (r.rec.first_node.empty()) r.rec.first_node = node;
  r.rec.final_node = node;
  if (spec_.protection.mode != ProtectionMode::kNone && r.replica < 0 && !handoff) {
    protect(r, g.node);
  }
  const std::uint32_t epoch = r.epoch;
  const std::uint64_t id = r.rec.id;
  GpuJob prefill{JobKind::kPrefill, id, r.rec.prompt_tokens - cached,
                 [this, id, epoch, gpu, handoff, booked](SimTime, SimTime end) {
                   Request* rp = find_request(id);
                   if (!rp || rp->epoch != epoch) return;
                   if (gpus_[gpu].cache) cache_prompt(*rp, gpu, booked);
                   rp->context = rp->rec.prompt_tokens;
                   rp->remaining = rp->rec.output_tokens - 1;
                   // Disaggregated, the first token reaches the user with the handoff.
                   if (rp->rec.first_token_ns < 0 && (!handoff || rp->remaining <= 0)) {
                     rp->rec.first_token_ns = end.ns;
                   }
                   rp->phase = Phase::kDecoding;
                   if (rp->remaining <= 0) {
                     on_finished(gpu, rp->rec.id);
                     return;
                   }
                   if (handoff) {
                     rp->phase = Phase::kHandingOff;
                     rp->handoff_since = end.ns;
                     try_handoff(*rp);
                     return;
                   }
                   gpus_[gpu].worker->add_decoding({rp->rec.id, rp->context, rp->remaining});
                   if (rp->replica >= 0) {
                     std::pair<Request*, std::int64_t> first{rp, rp->context};
                     stream(gpu, {&first, 1});
                   }
                   if (node_draining_[gpus_[gpu].node]) {
                     start_move(*rp, MoveTrigger::kDrain, gpus_[gpu].node, sim_.now().ns);
                   }
                 },
                 cached};
  if (fetch > 0) {
    // The run's last blocks come from the storage tier over the network.
    fetch_then_prefill(r, gpu, fetch, sim_.now() + load, std::move(prefill));
  } else if (load.ns > 0) {
    // Blocks from the host tier cross the host link first; the GPU serves others meanwhile.
    sim_.schedule_after(load, [this, id, epoch, gpu, job = std::move(prefill)]() mutable {
      Request* rp = find_request(id);
      if (rp && rp->epoch == epoch && rp->gpu == gpu) gpus_[gpu].worker->submit(std::move(job));
    });
  } else {
    g.worker->submit(std::move(prefill));
  }
  // ProxyKV scores come from the proxy, asynchronously to the target's prefill.
  const std::optional<ProxyKvSpec>& proxy = deployment(r).spec.proxy_kv;
  const bool scoring =
      proxy && (policy_->needs_scores() || spec_.protection.mode == ProtectionMode::kProxyKv);
  if (scoring) {
    // On the target's GPU (a second stream sharing its compute) or on the node's proxy GPU.
    GpuWorker& scorer = proxy->placement == ProxyPlacement::kProxyGpu
                            ? *proxy_gpus_[static_cast<std::size_t>(g.node)]
                            : *g.worker;
    scorer.submit(
        {JobKind::kProxyScore, id, r.rec.prompt_tokens, [this, id, epoch](SimTime, SimTime) {
           Request* rp = find_request(id);
           if (!rp || rp->epoch != epoch) return;
           rp->scored = true;
           if (rp->phase == Phase::kHandingOff) try_handoff(*rp);
         }});
  }
}

void ServingModel::try_handoff(Request& r) {
  if (policy_->handoff_waits_for_scores() && deployment(r).spec.proxy_kv && !r.scored) return;
  start_move(r, MoveTrigger::kHandoff, r.gpu >= 0 ? node_of(r.gpu) : -1, r.handoff_since);
}

bool ServingModel::can_be_served(const Request& r) const {
  for (const Gpu& g : gpus_) {
    if (g.worker->up() && node_deployment_[static_cast<std::size_t>(g.node)] == r.rec.deployment)
      return true;
  }
  return false;
}

std::string ServingModel::unfinished_reason(const Request& r) const {
  switch (r.phase) {
    case Phase::kQueued:
      return "waiting for a GPU with room";
    case Phase::kPrefill:
      return "in prefill";
    case Phase::kHandingOff:
      return "prefilled, waiting for its handoff (scores, or a decode GPU with room)";
    case Phase::kDecoding:
      return "decoding";
    case Phase::kMoving:
      return "waiting to recover (failure not yet detected)";
    case Phase::kPreempted:
      return r.swap_node >= 0 ? "preempted: swapped out to host DRAM, waiting for room on its node"
                              : "preempted: waiting for a GPU with room to recompute";
    case Phase::kResuming:
      return r.swap_node >= 0 ? "preempted: swapping back in" : "preempted: recomputing";
    case Phase::kDone:
      return "";
  }
  return "";
}

void ServingModel::release_gpu(Request& r) {
  if (r.gpu < 0) return;
  unreserve(r.gpu, r);
  r.gpu = -1;
}

}  // namespace kvshift::sim
