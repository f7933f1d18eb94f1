// ServingModel: construction, run control, arrivals, routing and admission.
#include "sim/serving/serving_model_internal.hpp"

#include <algorithm>
#include <stdexcept>

#include "cost_model/storage.hpp"

namespace kvshift::sim {

using namespace serving_detail;

namespace {

// The deployments' parts of the arrivals (the workload's draw).
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
      workload_(scenario_workload(spec)),
      router_(spec.pools.empty() ? spec.policies.router : spec.pools.front().router,
              derive_seed(spec.seed, 2)),
      deployments_(spec.deployments.empty() ? 1 : spec.deployments.size()),
      engine_(move_methods(spec).engine) {
  result_.strategy = strategy_name(strategy);
  end_ns_ = from_seconds(spec.duration).ns;
  make_move_engine();
  const std::size_t n = spec.cluster.nodes.size();
  node_deployment_.assign(n, -1);
  set_up_deployments();
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
    add_gpus(static_cast<int>(i), epoch_cap);
  }
  if (gpus_.empty()) throw std::runtime_error("the cluster has no GPU");
  if (spec.serving.preemption) router_.set_watermark(spec.serving.preemption->watermark);
  set_up_stores();
  result_.gpus = static_cast<std::int64_t>(gpus_.size());
  for (auto& g : gpus_) g.worker->set_horizon(SimTime{end_ns_});
  if (records_.sink) records_.sink->begin_run(result_.strategy);
}

void ServingModel::set_up_deployments() {
  const SimulationSpec& spec = spec_;
  const std::size_t n = spec.cluster.nodes.size();
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
}

void ServingModel::add_gpus(int i, std::int64_t epoch_cap) {
  const SimulationSpec& spec = spec_;
  const ClusterNode& node = spec.cluster.nodes[static_cast<std::size_t>(i)];
  const int d = deployment_serving(spec, node.pool);
  node_deployment_[static_cast<std::size_t>(i)] = d;
  if (d != 0 && &costs_of(i) == &costs_) {  // costs_ prices deployment 0
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
    gpu.node = i;
    const std::int64_t capacity = node.hbm_per_gpu.count - weights;
    if (capacity <= 0) {
      throw std::runtime_error("node " + node.name + ": the weights of " + dep.spec.model.name +
                               " do not fit in HBM");
    }
    const int index = router_.add_gpu(i, capacity, node.pool);
    gpu.worker = std::make_unique<GpuWorker>(sim_, *this, costs_of(i), index,
                                             "gpu:" + node.name + "/" + std::to_string(g),
                                             spec.serving.max_batch, epoch_cap, result_.gpu_time,
                                             records_.trace ? &result_.trace : nullptr);
    gpu.worker->set_batch_reconstructions(spec.predictors.batch_reconstruction);
    gpu.worker->set_prefill_chunk(spec.serving.prefill_chunk_tokens);
    gpu.worker->set_growth_booking(spec.serving.preemption.has_value());
    if (spec.serving.prefix_cache.enabled) gpu.cache = std::make_unique<PrefixCache>(prefix_block);
    node_gpus_[static_cast<std::size_t>(i)].push_back(index);
    if (g == 0 && spec.serving.prefix_cache.enabled && spec.serving.prefix_cache.host_offload) {
      host_tiers_[static_cast<std::size_t>(i)] = std::make_unique<PrefixCache>(prefix_block);
      if (spec.serving.prefix_cache.ssd_tier) {
        ssd_tiers_[static_cast<std::size_t>(i)] = std::make_unique<PrefixCache>(prefix_block);
      }
    }
    if (g == 0 && dep.spec.proxy_kv && dep.spec.proxy_kv->placement == ProxyPlacement::kProxyGpu) {
      proxy_gpus_[static_cast<std::size_t>(i)] =
          std::make_unique<GpuWorker>(sim_, *this, costs_of(i), -1, "proxy:" + node.name, 1, 1,
                                      result_.gpu_time, records_.trace ? &result_.trace : nullptr);
    }
  }
}

void ServingModel::set_up_stores() {
  const SimulationSpec& spec = spec_;
  const std::size_t n = spec.cluster.nodes.size();
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
