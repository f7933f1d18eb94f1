// ServingModel: preemption when HBM runs out (serving.preemption), as vLLM does.
// Admission books a request's prompt; before each decode pass the GPU's batch
// books the blocks it grows into (book_growth). When one more step does not fit,
// the latest arrival decoding on that GPU is preempted, one at a time, until it
// does. A preempted request waits in preempted_ and resumes before new arrivals:
// - recompute: on any GPU with room, by a prefill of its prompt and the tokens it
//   produced (prompt blocks still cached in that GPU's HBM are reused);
// - swap: its KV went to its node's host DRAM over the host link and comes back
//   to a GPU of that node over it; without room there, or once its node failed or
//   drains, it is recomputed.
// The copies run over the GPU's host link beside its compute (DMA), in turn with
// the link's other copies; a swap frees its HBM at once, as vLLM's swap frees the
// blocks in the step that swaps them.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

std::int64_t ServingModel::book_growth(int gpu, std::span<const DecodeState> batch,
                                       std::int64_t steps, std::vector<std::uint64_t>& preempt) {
  // The bytes the batch books beyond what it holds to take k more steps.
  auto growth = [&](std::int64_t k) {
    std::int64_t bytes = 0;
    for (const DecodeState& s : batch) {
      const Request& r = requests_.at(s.request);
      const std::int64_t tokens =
          std::min(s.context + k, r.rec.prompt_tokens + r.rec.output_tokens);
      bytes += std::max<std::int64_t>(0, deployment(r).block_bytes(tokens) - r.reserved);
    }
    return bytes;
  };
  const std::int64_t room = router_.room(gpu);
  if (growth(1) > room) {
    // The latest arrival decoding here leaves; the worker asks again for the rest.
    const RequestRouter::Members& members = router_.members(gpu);
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      Request& r = requests_.at(it->first);
      if (r.phase != Phase::kDecoding || r.gpu != gpu) continue;
      preempt.push_back(r.rec.id);
      this->preempt(r, gpu);
      return 0;
    }
    throw std::logic_error("invariant: GPU " + std::to_string(gpu) +
                           " has no room for its batch's next step and nothing to preempt");
  }
  // The most steps whose growth fits (growth is monotone in k); usually all of them.
  std::int64_t lo = 1, hi = steps;
  if (growth(steps) <= room) lo = steps;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (growth(mid) <= room) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  for (const DecodeState& s : batch) {
    Request& r = requests_.at(s.request);
    const std::int64_t tokens = std::min(s.context + lo, r.rec.prompt_tokens + r.rec.output_tokens);
    const std::int64_t more = deployment(r).block_bytes(tokens) - r.reserved;
    if (more <= 0) continue;
    router_.grow(gpu, r.rec.id, more);
    r.reserved += more;
  }
  tiers_->fit_cache(gpu);  // the room it took may have held unpinned prefix blocks
  return lo;
}

void ServingModel::preempt(Request& r, int gpu) {
  PreemptionStats& st = result_.preemption;
  ++st.preemptions;
  if (r.rec.preemptions++ == 0) ++st.preempted_requests;
  unreserve(gpu, r);  // its blocks, and its pins of cached prefix blocks
  r.gpu = -1;
  r.phase = Phase::kPreempted;
  r.reserved = deployment(r).block_bytes(r.context);  // what resuming books
  const int node = node_of(gpu);
  // A request that outgrows the GPU on its own would be preempted forever.
  const std::int64_t next = deployment(r).block_bytes(r.context + 1);
  if (next > router_.capacity(gpu)) {
    r.phase = Phase::kDone;
    r.rec.outcome = RequestOutcome::kFailed;
    r.rec.reason = "its KV (" + std::to_string(next) +
                   " bytes at its next token) outgrows the GPU's KV room (" +
                   std::to_string(router_.capacity(gpu)) + " bytes)";
    r.rec.finish_ns = sim_.now().ns;
    drop_replica(r);
    admit_soon();
    return;
  }
  if (spec_.serving.preemption->mode == PreemptionSpec::Mode::kSwap) {
    if (replicas_->room(node) >= r.reserved) {
      replicas_->book_swap(node, r.reserved);
      tiers_->fit_host_tier(node);  // the host prefix tier keeps what is left
      r.swap_node = node;
      r.swap_bytes = r.reserved;
      r.swap_ready_ns = links_.copy(gpu, false, r.reserved).ns;
      ++st.swap_outs;
      st.swap_out_bytes += r.reserved;
      swapped_bytes_ += r.reserved;
      st.swapped_peak_bytes = std::max(st.swapped_peak_bytes, swapped_bytes_);
    } else {
      ++st.swap_fallbacks;
    }
  }
  preempted_.insert(r.rec.id);
  admit_soon();
}

void ServingModel::resume_preempted() {
  // A resumption may preempt others on its GPU (they join the set): walk a snapshot.
  const std::vector<std::uint64_t> waiting(preempted_.begin(), preempted_.end());
  for (const std::uint64_t id : waiting) {
    Request& r = requests_.at(id);
    if (r.phase == Phase::kPreempted && resume(r)) preempted_.erase(id);
  }
}

void ServingModel::drop_swap(Request& r) {
  if (r.swap_node < 0) return;
  replicas_->unbook_swap(r.swap_node, r.swap_bytes);
  swapped_bytes_ -= r.swap_bytes;
  ++result_.preemption.swap_fallbacks;
  r.swap_node = -1;
  r.swap_bytes = 0;
}

bool ServingModel::resume(Request& r) {
  tiers_->unpin(r.prefix);  // pins of a cache lost with a failed GPU
  PreemptionStats& st = result_.preemption;
  const std::uint64_t id = r.rec.id;
  if (r.swap_node >= 0 && (!node_up_[r.swap_node] || node_draining_[r.swap_node])) drop_swap(r);
  if (r.swap_node >= 0) {
    // Back to a GPU of the node whose host DRAM holds it, once the copy out has ended.
    const int node = r.swap_node;
    const std::vector<int> gpus = router_.destinations(
        r.reserved, -1, 1, deployment(r).decode_pools, [node](int n) { return n == node; });
    if (gpus.empty()) return false;
    const int gpu = gpus.front();
    reserve(gpu, r, r.reserved);
    r.gpu = gpu;
    r.phase = Phase::kResuming;
    const SimTime in = links_.copy(gpu, true, r.reserved, SimTime{r.swap_ready_ns});
    sim_.schedule_at(in, [this, id, gpu, epoch = r.epoch] {
      Request* q = requests_.find(id);
      if (!q || q->epoch != epoch || q->phase != Phase::kResuming) return;
      ++result_.preemption.swap_ins;
      result_.preemption.swap_in_bytes += q->swap_bytes;
      replicas_->unbook_swap(q->swap_node, q->swap_bytes);
      swapped_bytes_ -= q->swap_bytes;
      q->swap_node = -1;
      q->swap_bytes = 0;
      rejoin(*q, gpu);
    });
    return true;
  }
  // Recompute: a prefill of everything it holds, on top of the prompt blocks the GPU caches.
  const int gpu = router_.route(r.reserved, -1, deployment(r).decode_pools);
  if (gpu < 0) return false;
  std::int64_t cached = 0;
  if (tiers_->caches(gpu) && !r.prefix.keys.empty()) {
    const std::size_t hit = tiers_->run(r.prefix, r.rec.prompt_tokens, gpu).in_hbm;
    if (hit > 0) {
      tiers_->pin(r.prefix, gpu, hit);
      cached = static_cast<std::int64_t>(hit) * spec_.serving.prefix_cache.block_tokens;
    }
  }
  reserve(gpu, r, r.reserved - tiers_->pinned_bytes(r.prefix));
  r.gpu = gpu;
  r.phase = Phase::kResuming;
  ++st.recomputes;
  st.recompute_tokens += r.context - cached;
  st.recompute_cached_tokens += cached;
  gpus_[gpu].worker->submit({JobKind::kRecompute, id, r.context - cached,
                             [this, id, gpu, epoch = r.epoch](SimTime, SimTime) {
                               Request* q = requests_.find(id);
                               if (q && q->epoch == epoch && q->phase == Phase::kResuming) {
                                 rejoin(*q, gpu);
                               }
                             },
                             cached});
  return true;
}

void ServingModel::rejoin(Request& r, int gpu) {
  const int node = node_of(gpu);
  r.phase = Phase::kDecoding;
  r.rec.final_node = spec_.cluster.nodes[node].name;
  rehome_replica(r, node);
  gpus_[gpu].worker->add_decoding({r.rec.id, r.context, r.remaining});
  if (node_draining_[node]) start_move(r, MoveTrigger::kDrain, node, sim_.now().ns);
}

}  // namespace kvshift::sim
