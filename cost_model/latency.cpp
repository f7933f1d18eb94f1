#include "cost_model/latency.hpp"

#include "cost_model/move_plan.hpp"

namespace kvshift::cost_model {
namespace {

Seconds seconds_of(std::int64_t ns) { return {static_cast<double>(ns) * 1e-9}; }

}  // namespace

LatencyReport latency(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      const StorageReport& s, const Path& p, const GpuSpec& gpu,
                      const ComputeCosts& compute, const LatencyOptions& options) {
  // Every figure is a move plan priced by the one estimator the simulator uses.
  MoveMethods methods{&m, &t, options.predictor_dtype, options.retention, 0, 0, options.engine};
  MoveRoute network;
  network.data = MoveRoute::Leg::kNetwork;
  network.data_path = p;
  network.predictor = MoveRoute::Leg::kWithData;  // the predictor shares the path
  network.host_link = gpu.host_link;
  MoveRoute local = network;
  local.data = MoveRoute::Leg::kLocal;
  const MoveState resident{tokens, tokens, SourceKv::kFull, true, true};
  MoveState shipped = resident;
  shipped.predictor_at_dst = false;
  auto time = [&](Strategy st, const MoveState& state, const MoveRoute& route) {
    return seconds_of(
        estimate_move(plan_move(st, methods, state), methods, route, 0, compute).total_ns());
  };

  LatencyReport r;
  r.prefill = compute.prefill(m, tokens);
  r.reconstruct =
      t.empty() ? Seconds{0} : compute.reconstruct(m, t, tokens, 1, options.predictor_dtype);
  for (const Strategy s : kConcreteStrategies) {
    switch (s) {
      case Strategy::kRiskKv:  // nothing omitted: RISK-KV is a full transfer
        r.move.set(
            s, t.empty() ? time(Strategy::kFullKv, resident, network) : time(s, resident, network));
        break;
      case Strategy::kHybrid:
        if (options.hybrid) {
          const MovePlan hybrid =
              balance_hybrid(plan_move(s, methods, resident), methods, network, 0, compute);
          r.move.set(s, seconds_of(estimate_move(hybrid, methods, network, 0, compute).total_ns()));
          r.hybrid_front_tokens = hybrid.front_tokens;
        }
        break;
      case Strategy::kPrefixRecompute:
        if (options.held_tokens) {
          MoveState stale = resident;
          stale.available = *options.held_tokens;
          r.move.set(s, time(s, stale, network));
        }
        break;
      default:
        r.move.set(s, time(s, resident, network));
    }
  }
  if (!t.empty()) {
    r.risk_kv_with_predictor = time(Strategy::kRiskKv, shipped, network);
    r.local_risk_kv = time(Strategy::kRiskKv, resident, local);
  } else {
    r.risk_kv_with_predictor = r.move.at(Strategy::kFullKv);
    r.local_risk_kv = time(Strategy::kFullKv, resident, local);
  }
  r.local_replay = r.prefill;

  // RISK-KV vs full: 8·kept/B + recon = 8·full/B  ⇔  B = 8·saved/recon.
  if (s.kv_saved.count > 0 && r.reconstruct.value > 0) {
    r.crossover_full = BitsPerSecond{s.kv_saved.bits() / r.reconstruct.value};
  }
  // RISK-KV vs replay: 8·(kept − ids)/B + recon = prefill  ⇔  B = 8·(kept − ids)/(prefill − recon).
  const double extra_bits = (s.kv_kept - token_id_bytes(tokens)).bits();
  const double spare = r.prefill.value - r.reconstruct.value;
  if (!t.empty() && spare > 0 && extra_bits > 0) {
    r.crossover_replay = BitsPerSecond{extra_bits / spare};
  }
  return r;
}

}  // namespace kvshift::cost_model
