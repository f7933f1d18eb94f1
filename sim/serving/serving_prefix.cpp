// ServingModel: prefills that reuse cached prompt blocks — where an arrival
// prefills when routing is prefix-aware, and the storage tier's blocks fetched
// ahead of a prefill. The tiers themselves are PrefixTiers (prefix_tiers.hpp).
#include <algorithm>
#include <string>

#include "sim/serving/serving_model_internal.hpp"

namespace kvshift::sim {

int ServingModel::route_arrival(const Request& r) {
  const PoolSet pools = deployment(r).arrival_pools;
  if (!router_.prefix_aware(pools) || r.prefix.keys.empty()) {
    return router_.route(r.reserved, -1, pools);
  }
  // Estimated time to the first token on each GPU with room: its queue, the load from the
  // lower tiers of what its HBM lacks, and the prefill of the rest; ties go to the lower share.
  const std::int64_t block_tokens = spec_.serving.prefix_cache.block_tokens;
  const std::int64_t prompt = r.rec.prompt_tokens;
  int best = -1;
  std::int64_t best_ns = 0;
  for (int gpu : router_.fitting(r.reserved, pools)) {
    const Gpu& g = gpus_[gpu];
    const PrefixRun run = tiers_->run(r.prefix, prompt, gpu);
    const std::int64_t cached = static_cast<std::int64_t>(run.blocks()) * block_tokens;
    const std::int64_t ns =
        g.worker->backlog().ns + run.load.ns + g.costs->extend(cached, prompt - cached).ns;
    const auto share = [&](int i) {
      return static_cast<double>(router_.reserved(i)) / static_cast<double>(router_.capacity(i));
    };
    if (best < 0 || ns < best_ns || (ns == best_ns && share(gpu) < share(best))) {
      best = gpu;
      best_ns = ns;
    }
  }
  return best;
}

void ServingModel::fetch_then_prefill(Request& r, int gpu, std::size_t blocks, SimTime ready,
                                      GpuJob job) {
  const std::int64_t bytes = static_cast<std::int64_t>(blocks) * tiers_->storage_block_bytes();
  const std::int64_t tokens =
      static_cast<std::int64_t>(blocks) * spec_.serving.prefix_cache.block_tokens;
  const std::uint64_t id = r.rec.id;
  const std::uint32_t epoch = r.epoch;
  auto done = [this, id, epoch, gpu, bytes, tokens, ready, job = std::move(job)](
                  bool delivered, const std::string&) mutable {
    Request* rp = requests_.find(id);
    if (!rp || rp->epoch != epoch || rp->gpu != gpu) return;
    SimTime at = std::max(ready, sim_.now());
    if (delivered) {
      at = std::max(at, links_.copy(gpu, true, bytes));
    } else {  // the storage node or the path failed: those blocks are prefilled instead
      ++result_.prefix_cache.storage.failed_reads;
      job.prefix -= tokens;
      job.tokens += tokens;
    }
    sim_.schedule_at(at, [this, id, epoch, gpu, job = std::move(job)]() mutable {
      Request* q = requests_.find(id);
      if (q && q->epoch == epoch && q->gpu == gpu) gpus_[gpu].worker->submit(std::move(job));
    });
  };
  fabric_.send(node_id(tiers_->storage_node()), node_id(node_of(gpu)), Bytes{bytes},
               std::move(done));
}

}  // namespace kvshift::sim
