// One calibration request as a quality probe: a history of H tokens followed by
// E eval tokens. The exact history cache (first H−1 tokens) and the exact eval
// pass are computed once; the residual stream entering chosen layers is kept,
// so a probe with some layers' history KV replaced (reconstructed) re-runs only
// the layers from the first replaced one upward (Model::run_layers) — layers
// below it see the same keys and the same inputs. NLL is teacher forced over
// the E eval tokens: input [h_{H−1}, e_0..e_{E−1}], targets e_0..e_{E−1}.
// Leaves out: batching several probes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/model.hpp"

namespace kvshift::backend::calibrate {

/// What a probe records of its history pass besides the cache.
struct ProbeCapture {
  bool attention_stats = false;  ///< per-key statistics of the history pass (pruning scores)
  int stats_window = 32;         ///< queries counted in stats.window_mass (SnapKV)
};

class RequestProbe {
 public:
  /// Runs the exact history and eval passes; keeps the residual entering each layer in
  /// `resume_layers` (any layer may be resumed from if the list is empty: all are kept).
  RequestProbe(const Model& model, std::span<const std::int32_t> history,
               std::span<const std::int32_t> eval, const std::vector<int>& resume_layers = {},
               const ProbeCapture& capture = {});

  /// Exact cache of the first H−1 history tokens.
  const KvCache& exact_cache() const { return cache_; }
  /// Exact per-token NLL of the E eval tokens.
  const std::vector<double>& exact_nll() const { return exact_nll_; }
  double exact_mean() const;
  /// The history pass's attention statistics over the H−1 cached keys (empty unless captured).
  const AttentionStats& history_stats() const { return stats_; }
  /// Wall seconds of the history pass (H−1 tokens) alone.
  double history_seconds() const { return history_seconds_; }

  /// Per-token NLL of the eval tokens with `cache` (a modified copy of exact_cache(), used
  /// up) in place of the exact history; layers below `first_layer` must be unchanged in it.
  std::vector<double> nll_with(KvCache cache, int first_layer) const;

 private:
  std::vector<double> logits_nll(const Matrix& x) const;

  const Model* model_;
  std::vector<std::int32_t> input_;    // [h_{H−1}, e...]
  std::vector<std::int32_t> targets_;  // e...
  KvCache cache_;
  std::vector<Matrix> residual_;  // per layer (empty when not kept)
  std::vector<double> exact_nll_;
  AttentionStats stats_;
  double history_seconds_ = 0.0;
};

}  // namespace kvshift::backend::calibrate
