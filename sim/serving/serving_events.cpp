// ServingModel: scheduled events — node and GPU failures and repairs, link changes,
// drains, load-balancing checks and link sampling.
#include "sim/serving/serving_model_internal.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvshift::sim {

using namespace serving_detail;

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
      case EventKind::kGpuFailure: {
        const int gpu = node_gpus_[index_of(e.node)].at(static_cast<std::size_t>(e.gpu));
        const SimTime delay = from_seconds(e.detection_delay);
        sim_.schedule_at(at, [this, gpu, delay] { gpu_failure(gpu, delay); });
        if (e.repair_after) {
          sim_.schedule_at(at + from_seconds(*e.repair_after), [this, gpu] { gpu_repair(gpu); });
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
        std::optional<SimTime> lat;
        if (e.latency) lat = from_seconds(*e.latency);
        sim_.schedule_at(at, [this, link = e.link, bw = e.bandwidth, lat] {
          fabric_.degrade_link(link, bw, lat);
        });
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
      case EventKind::kPathStall:
      case EventKind::kPathFailure: {
        const int src = index_of(e.from), dst = index_of(e.to);
        sim_.schedule_at(at, [this, src, dst, kind = e.kind] { path_fault(src, dst, kind); });
        if (e.repair_after) {
          sim_.schedule_at(at + from_seconds(*e.repair_after),
                           [this, src, dst] { path_repair(src, dst); });
        }
        break;
      }
    }
  }
}

void ServingModel::node_failure(int node, SimTime detection_delay) {
  if (!node_up_[node]) return;
  node_up_[node] = false;
  for (Deployment& d : deployments_) d.predictors->drop(node);
  if (proxy_gpus_[node]) proxy_gpus_[node]->fail();  // scores in flight are lost
  const std::vector<std::uint64_t> lost =
      fail_gpus(node_gpus_[node], "node " + spec_.cluster.nodes[node].name + " failed");
  tiers_->node_failed(node);  // its host tier, and the storage tier if it holds it
  // Replicas held here are gone: their requests re-stream to a new replica.
  for (Request& r : requests_) {
    if (r.replica == node && r.phase != Phase::kDone) drop_replica(r);
  }
  fabric_.fail_node(node_id(node));
  recover_lost(lost, node, detection_delay);
  // KV swapped out to this node's host DRAM is gone: those requests recompute.
  for (const std::uint64_t id : preempted_) {
    if (Request& r = requests_.at(id); r.swap_node == node) drop_swap(r);
  }
  for (Request& r : requests_) {
    if (r.phase != Phase::kDone && r.replica < 0 && r.gpu >= 0 && !gpus_[r.gpu].prefill_only &&
        spec_.protection.mode != ProtectionMode::kNone) {
      protect(r, node_of(r.gpu));
      r.unstreamed = r.context;
    }
  }
  admit_pending();
}

void ServingModel::gpu_failure(int gpu, SimTime detection_delay) {
  const int node = node_of(gpu);
  if (!node_up_[node] || !gpus_[gpu].worker->up()) return;
  // The node's host DRAM survives: replicas kept there (local placement) recover over the
  // host link.
  const auto& on_node = node_gpus_[node];
  const auto ordinal = std::find(on_node.begin(), on_node.end(), gpu) - on_node.begin();
  const std::vector<std::uint64_t> lost = fail_gpus(
      {gpu}, "GPU " + spec_.cluster.nodes[node].name + "/" + std::to_string(ordinal) + " failed");
  recover_lost(lost, node, detection_delay);
  admit_pending();
}

void ServingModel::gpu_repair(int gpu) {
  if (!node_up_[node_of(gpu)] || gpus_[gpu].worker->up()) return;
  gpus_[gpu].worker->repair();
  update_open(gpu);
  admit_pending();
}

std::vector<std::uint64_t> ServingModel::fail_gpus(const std::vector<int>& gpus,
                                                   const std::string& why) {
  auto failed = [&](int g) { return std::find(gpus.begin(), gpus.end(), g) != gpus.end(); };
  std::vector<std::uint64_t> lost;
  for (int g : gpus) {
    // The requests that live here are those holding a reservation; queued work of others
    // (a ProxyKV scoring job of a request that has since migrated) is dropped, not lost.
    gpus_[g].worker->fail();
    links_.clear(g);  // copies to or from its HBM are gone
    for (std::uint64_t id : router_.clear(g)) lost.push_back(id);
    tiers_->gpu_failed(g);
    update_open(g);  // after fail(): the GPU takes no new work
  }
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  // Moves that were heading to (or leaving) these GPUs fail.
  const std::vector<std::uint64_t> broken = move_engine_->fail_touching(failed, why);
  std::erase_if(lost, [&](std::uint64_t id) {
    return std::binary_search(broken.begin(), broken.end(), id) || move_engine_->moving(id);
  });
  return lost;
}

void ServingModel::recover_lost(const std::vector<std::uint64_t>& lost, int node,
                                SimTime detection_delay) {
  const std::int64_t now = sim_.now().ns;
  for (std::uint64_t id : lost) {
    Request& r = requests_.at(id);
    if (r.phase == Phase::kDone) continue;
    r.gpu = -1;
    ++r.epoch;
    if (r.phase == Phase::kResuming) {  // preempted, and its resumption died with the GPU
      r.phase = Phase::kPreempted;
      preempted_.insert(id);
      continue;
    }
    if (r.phase == Phase::kPrefill || r.phase == Phase::kQueued || r.phase == Phase::kHandingOff) {
      r.phase = Phase::kQueued;  // nothing computed yet worth saving: start over
      deployment(r).pending.push_front(id);
      continue;
    }
    r.phase = Phase::kMoving;
    sim_.schedule_after(detection_delay, [this, id, node, now, epoch = r.epoch] {
      Request* q = requests_.find(id);
      if (q && q->epoch == epoch && q->phase == Phase::kMoving) {
        start_move(*q, MoveTrigger::kFailure, node, now);
      }
    });
  }
}

void ServingModel::node_repair(int node) {
  if (node_up_[node]) return;
  node_up_[node] = true;
  node_draining_[node] = false;
  if (proxy_gpus_[node]) proxy_gpus_[node]->repair();
  for (int g : node_gpus_[node]) {
    gpus_[g].worker->repair();
    update_open(g);
  }
  fabric_.repair_node(node_id(node));
  if (const int d = node_deployment_[node];
      d >= 0 && spec_.predictors.placement == PredictorPlacement::kPreloaded &&
      deployments_[static_cast<std::size_t>(d)].spec.risk_kv) {
    deployments_[static_cast<std::size_t>(d)].predictors->preload(node);
  }
  admit_pending();
}

void ServingModel::drain(int node) {
  if (!node_up_[node]) return;
  node_draining_[node] = true;
  for (int g : node_gpus_[node]) update_open(g);
  const std::int64_t now = sim_.now().ns;
  // Moves heading here are re-planned elsewhere: no move lands on a draining node.
  move_engine_->cancel_into(node,
                            "destination " + spec_.cluster.nodes[node].name + " started draining");
  for (int g : node_gpus_[node]) {
    std::vector<std::uint64_t> members;
    for (const auto& [id, bytes] : router_.members(g)) members.push_back(id);
    for (std::uint64_t id : members) {
      Request& r = requests_.at(id);
      if (r.phase == Phase::kDecoding) start_move(r, MoveTrigger::kDrain, node, now);
    }
  }
}

void ServingModel::path_fault(int src, int dst, EventKind kind) {
  faults_.set(src, dst, kind);
  // Transfers in flight on a stalled path hang too; on a failed one they fail.
  if (kind == EventKind::kPathStall) {
    move_engine_->stall_path(src, dst);
  } else {
    move_engine_->fail_path(src, dst);
  }
}

void ServingModel::path_repair(int src, int dst) {
  for (auto& f : faults_.clear(src, dst)) f();  // each checks that its send is still wanted
}

void ServingModel::rebalance_check() {
  const RebalanceSpec& rb = spec_.policies.rebalance;
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    const Gpu& gpu = gpus_[g];
    if (!gpu.worker->up() || static_cast<double>(router_.reserved(g)) <=
                                 rb.threshold * static_cast<double>(router_.capacity(g))) {
      continue;
    }
    Request* biggest = nullptr;
    for (const auto& [id, bytes] : router_.members(g)) {
      Request& r = requests_.at(id);
      if (r.phase == Phase::kDecoding && (!biggest || r.context > biggest->context)) biggest = &r;
    }
    if (biggest) start_move(*biggest, MoveTrigger::kRebalance, gpu.node, sim_.now().ns);
  }
  if (sim_.now().ns + from_seconds(rb.check_interval).ns < end_ns_) {
    sim_.schedule_after(from_seconds(rb.check_interval), [this] { rebalance_check(); });
  }
}

}  // namespace kvshift::sim
