// ServingModel: arrivals, admission and prefill. An arrival waits in its
// deployment's line until the router finds a GPU with room; admit_pending()
// serves the waiting in order (recoveries, handoffs, preempted requests, then
// new arrivals); a prefill reuses the cached prefix, then decodes, hands off
// (P/D) or moves on (its node drains); the proxy scores it alongside when the
// run's policy needs ProxyKV scores.
#include <stdexcept>

#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

using namespace serving_detail;

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
  // The done requests at the front are recorded and freed here, in a top-level event, never
  // while a caller holds a Request&.
  requests_.retire_while([](const Request& r) { return r.phase == Phase::kDone; },
                         [this](const Request& r) { books_.add(r.rec); });
  if (requests_.next_id() != a.id) throw std::logic_error("request ids must be dense");
  Request& req = requests_.add();
  req.rec.id = a.id;
  req.rec.prompt_tokens = a.prompt_tokens;
  req.rec.output_tokens = a.output_tokens;
  req.rec.arrival_ns = a.arrival_ns;
  req.rec.deployment = a.deployment;
  // With preemption the prompt is booked now and the rest block by block as it decodes.
  req.reserved = deployment(req).block_bytes(a.prompt_tokens +
                                             (spec_.serving.preemption ? 0 : a.output_tokens));
  if (spec_.serving.prefix_cache.enabled) {
    req.prefix.keys = prefix_keys(a, spec_.serving.prefix_cache.block_tokens);
  }
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
    start_move(requests_.at(p.request), MoveTrigger::kFailure, p.from_node, p.stall_since);
  }
  for (std::size_t n = pending_handoffs_.size(); n > 0 && !pending_handoffs_.empty(); --n) {
    const auto [id, epoch] = pending_handoffs_.front();
    pending_handoffs_.pop_front();
    Request* r = requests_.find(id);
    if (r && r->epoch == epoch && r->phase == Phase::kHandingOff) try_handoff(*r);
  }
  // Then preempted requests, before new arrivals (vLLM's order). Each deployment's
  // arrivals wait in their own line: one model's full pools never hold up another's.
  if (!preempted_.empty()) resume_preempted();
  for (Deployment& d : deployments_) {
    while (!d.pending.empty()) {
      Request& r = requests_.at(d.pending.front());
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
  const bool handoff = gpus_[gpu].prefill_only;
  const std::int64_t booked = handoff ? deployment(r).block_bytes(r.rec.prompt_tokens) : r.reserved;
  // Prefix caching: reuse the longest cached run of the prompt's blocks, prefill the rest.
  SimTime load;
  std::size_t fetch = 0;
  const std::int64_t cached = tiers_->reuse(r.prefix, r.rec.prompt_tokens, gpu, load, fetch);
  reserve(gpu, r, booked - tiers_->pinned_bytes(r.prefix));
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
  GpuJob prefill{
      JobKind::kPrefill, id, r.rec.prompt_tokens - cached,
      [this, id, epoch, gpu, handoff, booked](SimTime, SimTime end) {
        Request* rp = requests_.find(id);
        if (!rp || rp->epoch != epoch) return;
        if (tiers_->caches(gpu)) tiers_->cache_prompt(rp->prefix, id, gpu, booked);
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
          std::pair<int, ReplicaStreams::Part> first{rp->replica, {id, rp->context, rp->epoch}};
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
      Request* rp = requests_.find(id);
      if (rp && rp->epoch == epoch && rp->gpu == gpu) gpus_[gpu].worker->submit(std::move(job));
    });
  } else {
    g.worker->submit(std::move(prefill));
  }
  start_scoring(r, gpu, epoch);
}

void ServingModel::start_scoring(const Request& r, int gpu, std::uint32_t epoch) {
  const Gpu& g = gpus_[gpu];
  const std::uint64_t id = r.rec.id;
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
           Request* rp = requests_.find(id);
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

}  // namespace kvshift::sim
