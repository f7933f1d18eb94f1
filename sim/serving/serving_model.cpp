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
      books_(result_, records),
      link_sampler_(sim, fabric, spec.link_sample_interval, from_seconds(spec.duration).ns,
                    result_.link_samples),
      workload_(scenario_workload(spec)),
      router_(spec.pools.empty() ? spec.policies.router : spec.pools.front().router,
              derive_seed(spec.seed, 2)),
      deployments_(spec.deployments.empty() ? 1 : spec.deployments.size()),
      engine_(move_methods(spec).engine),
      links_(sim, spec.gpu.host_link, result_.host_links),
      streams_(
          {sim, fabric, links_, faults_, node_up_}, engine_,
          spec.transfer_engine.stall_timeout.has_value(),
          [this](int replica, std::int64_t per_token, std::span<const ReplicaStreams::Part> parts) {
            on_flushed(replica, per_token, parts);
          }) {
  result_.strategy = strategy_name(strategy);
  end_ns_ = from_seconds(spec.duration).ns;
  // The move engine sees the model through the port.
  port_ = std::make_unique<Port>(*this);
  MoveEngineConfig engine;
  engine.engine = engine_;
  engine.max_inflight_per_destination = spec.transfer_engine.max_inflight_per_destination;
  engine.stall_timeout = spec.transfer_engine.stall_timeout;
  engine.nodes = spec.cluster.nodes.size();
  engine.end_ns = end_ns_;
  move_engine_ = std::make_unique<MoveEngine>(sim_, fabric_, *port_, result_, std::move(engine));
  const std::size_t n = spec.cluster.nodes.size();
  node_deployment_.assign(n, -1);
  set_up_deployments();
  for (std::size_t p = 1; p < spec.pools.size(); ++p) router_.add_pool(spec.pools[p].router);
  node_gpus_.resize(n);
  proxy_gpus_.resize(n);
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
  if (records.sink) records.sink->begin_run(result_.strategy);
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
    dep.kv_block_tokens = std::max<std::int64_t>(spec.serving.kv_block_tokens, 1);
    dep.protect_with(spec.protection.mode);
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
  const auto pool = static_cast<std::size_t>(node.pool);
  const ServingCosts& costs =
      pool < pool_costs_.size() && pool_costs_[pool] ? *pool_costs_[pool] : costs_;
  if (d != 0 && &costs == &costs_) {  // costs_ prices deployment 0
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
  for (int g = 0; g < node.gpu_count; ++g) {
    Gpu& gpu = gpus_.emplace_back();
    gpu.node = i;
    gpu.costs = &costs;
    gpu.prefill_only = !spec.pools.empty() && spec.pools[pool].role == PoolRole::kPrefill;
    const std::int64_t capacity = node.hbm_per_gpu.count - weights;
    if (capacity <= 0) {
      throw std::runtime_error("node " + node.name + ": the weights of " + dep.spec.model.name +
                               " do not fit in HBM");
    }
    const int index = router_.add_gpu(i, capacity, node.pool);
    gpu.worker = std::make_unique<GpuWorker>(sim_, *this, costs, index,
                                             "gpu:" + node.name + "/" + std::to_string(g),
                                             spec.serving.max_batch, epoch_cap, result_.gpu_time,
                                             books_.options().trace ? &result_.trace : nullptr);
    gpu.worker->set_batch_reconstructions(spec.predictors.batch_reconstruction);
    gpu.worker->set_prefill_chunk(spec.serving.prefill_chunk_tokens);
    gpu.worker->set_growth_booking(spec.serving.preemption.has_value());
    links_.add_gpu();
    node_gpus_[static_cast<std::size_t>(i)].push_back(index);
    if (g == 0 && dep.spec.proxy_kv && dep.spec.proxy_kv->placement == ProxyPlacement::kProxyGpu) {
      proxy_gpus_[static_cast<std::size_t>(i)] = std::make_unique<GpuWorker>(
          sim_, *this, costs, -1, "proxy:" + node.name, 1, 1, result_.gpu_time,
          books_.options().trace ? &result_.trace : nullptr);
    }
  }
}

void ServingModel::set_up_stores() {
  const SimulationSpec& spec = spec_;
  const std::size_t n = spec.cluster.nodes.size();
  if (predictor_source_ < 0) predictor_source_ = storage_node_ >= 0 ? storage_node_ : gpus_[0].node;
  std::vector<NodeKind> kinds;
  std::vector<std::int64_t> room;  // host DRAM of gpu nodes, capacity of storage nodes
  for (const ClusterNode& node : spec.cluster.nodes) {
    kinds.push_back(node.kind);
    room.push_back(node.host_memory.count);
  }
  replicas_ = std::make_unique<ReplicaStore>(std::move(kinds), std::move(room),
                                             spec.protection.placement, storage_node_);
  const PrefixCacheSpec& prefix = spec.serving.prefix_cache;
  int storage_tier_node = -1;
  if (prefix.storage_tier && prefix.enabled) {
    for (std::size_t i = 0; i < n; ++i) {
      if (spec.cluster.nodes[i].name == prefix.storage_tier->node) {
        storage_tier_node = static_cast<int>(i);
      }
    }
    if (storage_tier_node < 0) {
      throw std::logic_error("storage tier on unknown node " + prefix.storage_tier->node);
    }
  }
  std::vector<PrefixTiers::Gpu> tier_gpus;
  for (const Gpu& g : gpus_) {
    const int d = node_deployment_[static_cast<std::size_t>(g.node)];
    tier_gpus.push_back({g.node,
                         deployments_[static_cast<std::size_t>(d)].block_bytes(prefix.block_tokens),
                         g.costs});
  }
  tiers_ = std::make_unique<PrefixTiers>(
      prefix,
      PrefixTiers::Parts{sim_, fabric_, router_, links_, *replicas_, node_up_,
                         result_.prefix_cache},
      n, tier_gpus, storage_tier_node, deployments_.front().block_bytes(prefix.block_tokens));
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

void ServingModel::Deployment::protect_with(ProtectionMode mode) {
  const DeploymentSpec& dep = spec;
  const int layers = dep.model.layers;
  ReplicaStreams::Kept& kept = protected_kv;
  kept = {layers, 1, 0};
  replica_kv = cost_model::SourceKv::kFull;
  switch (mode) {
    case ProtectionMode::kNone:
      kept.layers = 0;
      replica_kv = cost_model::SourceKv::kNone;
      break;
    case ProtectionMode::kFull:
      break;
    case ProtectionMode::kRiskKv:
      if (dep.risk_kv) {
        // Per token: a topology's sink rows (the first few rows of the omitted layers, once per
        // request) are left out of the stream, sink_rows/context of the omitted bytes.
        kept.layers = layers - dep.risk_kv->omission.omitted_layers();
        replica_kv = cost_model::SourceKv::kKeptLayers;
      }
      break;
    case ProtectionMode::kProxyKv:
      if (dep.proxy_kv) {
        kept.share = dep.proxy_kv->retention;
        replica_kv = cost_model::SourceKv::kKeptTokens;
      }
      break;
  }
  const std::int64_t bytes = kept.layers * dep.model.kv_bytes_per_layer_token();
  kept.per_token = kept.share == 1 ? bytes : std::llround(kept.share * static_cast<double>(bytes));
}

int ServingModel::node_of(int gpu) const { return gpus_[gpu].node; }

// HBM bookings live in the router, which checks them.
void ServingModel::reserve(int gpu, const Request& r, std::int64_t bytes) {
  router_.reserve(gpu, r.rec.id, bytes);
  tiers_->fit_cache(gpu);  // the room it took may have held unpinned prefix blocks
}

void ServingModel::unreserve(int gpu, Request& r) {
  router_.release(gpu, r.rec.id);
  if (r.prefix.gpu == gpu) tiers_->unpin(r.prefix);
}

void ServingModel::update_open(int gpu) {
  router_.set_open(gpu, gpus_[gpu].worker->up() && !node_draining_[gpus_[gpu].node]);
}

// ------------------------------------------------------------ run control

void ServingModel::start() {
  schedule_next_arrival();
  schedule_events();
  if (spec_.policies.rebalance.enabled) {
    sim_.schedule_after(from_seconds(spec_.policies.rebalance.check_interval),
                        [this] { rebalance_check(); });
  }
  link_sampler_.start();
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
      if (r.rec.reason.empty()) r.rec.reason = r.unfinished_reason();
      if (!can_be_served(r)) {
        r.rec.outcome = RequestOutcome::kFailed;
        r.rec.reason =
            "every GPU of its deployment was down at the end of the run (" + r.rec.reason + ")";
      }
    }
    books_.add(r.rec);
  }
  requests_.clear();
  tiers_->close(result_.host_links);
  links_.close();
  for (const Deployment& d : deployments_) {
    result_.predictor_copies += d.predictors->copies();
    result_.predictor_bytes_resident += d.predictors->copies() * d.predictor_bytes;
  }
  return std::move(result_);
}

// ------------------------------------------------------------ records

bool ServingModel::can_be_served(const Request& r) const {
  for (const Gpu& g : gpus_) {
    if (g.worker->up() && node_deployment_[static_cast<std::size_t>(g.node)] == r.rec.deployment)
      return true;
  }
  return false;
}

std::string ServingModel::Request::unfinished_reason() const {
  switch (phase) {
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
      return swap_node >= 0 ? "preempted: swapped out to host DRAM, waiting for room on its node"
                            : "preempted: waiting for a GPU with room to recompute";
    case Phase::kResuming:
      return swap_node >= 0 ? "preempted: swapping back in" : "preempted: recomputing";
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
