// The receiver's work per strategy, timed.
#include "testbed/receiver_work.hpp"

#include <chrono>
#include <stdexcept>

#include "testbed/kv_payload.hpp"

namespace kvshift::testbed {
namespace {

template <class F>
double timed(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Rebuilt rebuild(cost_model::Strategy strategy, const Delivery& d, const RebuildContext& ctx) {
  if (ctx.model == nullptr) throw std::invalid_argument("rebuild: no model");
  const cost_model::ModelSpec& m = ctx.model->spec();
  const auto width = static_cast<int>(m.kv_heads * m.head_dim);
  Rebuilt r;
  using cost_model::Strategy;
  switch (strategy) {
    case Strategy::kFullKv:
      r.decode_s = timed([&] { r.cache = decode_layers(d.bytes, d.segments, m.layers, width); });
      r.work = "none";
      break;
    case Strategy::kRiskKv: {
      r.decode_s = timed([&] { r.cache = decode_layers(d.bytes, d.segments, m.layers, width); });
      backend::KvCache* caches[] = {&r.cache};
      r.compute_s = timed([&] { backend::reconstruct(ctx.predictors, caches, m); });
      r.work = "reconstruct";
      break;
    }
    case Strategy::kProxyKv:
      r.compute_s = timed([&] {
        r.cache = decode_kept_tokens(d.bytes, d.segments, m.layers, m.kv_heads, m.head_dim,
                                     ctx.context_tokens);
      });
      r.work = "compaction";
      break;
    case Strategy::kTokenReplay: {
      std::vector<std::int32_t> ids;
      r.decode_s = timed([&] { ids = decode_token_ids(d.bytes); });
      r.cache = ctx.model->new_cache();
      backend::ForwardOptions o;
      o.logits = backend::LogitsMode::kNone;
      r.compute_s = timed([&] { ctx.model->forward(ids, r.cache, o); });
      r.work = "prefill";
      break;
    }
    case Strategy::kPrefixRecompute:
    case Strategy::kHybrid:
      throw std::invalid_argument(std::string("rebuild: the testbed does not run ") +
                                  cost_model::strategy_name(strategy));
    case Strategy::kAdaptive:
      throw std::invalid_argument("rebuild: adaptive is resolved before a move runs");
  }
  return r;
}

}  // namespace kvshift::testbed
