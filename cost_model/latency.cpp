#include "cost_model/latency.hpp"

#include <cmath>

namespace kvshift::cost_model {

LatencyReport latency(const ModelSpec& m, const Topology& t, std::int64_t tokens,
                      const StorageReport& s, const Path& p, const GpuSpec& gpu,
                      const ComputeCosts& compute, const LatencyOptions& options) {
  LatencyReport r;
  r.prefill = compute.prefill(m, tokens);
  r.reconstruct =
      t.empty() ? Seconds{0} : compute.reconstruct(m, t, tokens, 1, options.predictor_dtype);
  r.full_kv = transfer_time(s.kv_full, p);
  r.token_replay = transfer_time(token_id_bytes(tokens), p) + r.prefill;
  r.risk_kv = transfer_time(s.kv_kept, p) + r.reconstruct;
  r.risk_kv_with_predictor = transfer_time(s.kv_kept + s.predictor_bytes_total, p) + r.reconstruct;
  const Bytes pruned{static_cast<std::int64_t>(
      std::llround(options.retention * static_cast<double>(s.kv_full.count)))};
  r.proxy_kv = transfer_time(pruned, p);
  r.local_replay = r.prefill;
  r.local_risk_kv = serialisation_time(s.kv_kept, gpu.host_link) + r.reconstruct;

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
