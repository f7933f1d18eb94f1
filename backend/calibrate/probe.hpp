// One calibration request as a quality probe: a history of H tokens followed by
// E eval tokens. The exact history cache (first H−1 tokens) and the exact eval
// pass are computed once; the residual stream entering chosen layers is kept,
// so a probe with some layers' history KV replaced (reconstructed) re-runs only
// the layers from the first replaced one upward (Model::run_layers) — layers
// below it see the same keys and the same inputs. NLL is teacher forced over
// the E eval tokens: input [h_{H−1}, e_0..e_{E−1}], targets e_0..e_{E−1}.
// A pass may also keep the residual entering chosen layers (Residuals), so that a
// later pass whose cache agrees with it below some layer starts there
// (nll_from): the same layers on the same inputs, so the same bits.
// Leaves out: batching several probes.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "backend/model.hpp"
#include "backend/reconstruct.hpp"

namespace kvshift::backend::calibrate {

/// What a probe records of its history pass besides the cache.
struct ProbeCapture {
  StatsRequest stats;  ///< per-key statistics of the history pass (pruning scores)
};

/// Per-row NLL of `targets` under the logits h · w_outᵀ (h: [rows, hidden], w_out: [vocab,
/// hidden]), as next_token_nll over the whole product gives it, computed a block of
/// vocabulary columns at a time with a running log-sum-exp (the [rows, vocab] logits are
/// never held whole). Each logit is the same product; the sums differ only in order.
std::vector<double> head_nll(const Matrix& h, const Matrix& w_out,
                             std::span<const std::int32_t> targets);

/// Residuals a pass kept for a later one: layer → the residual entering it ([E+1, hidden]).
using Residuals = std::map<int, Matrix>;

class RequestProbe {
 public:
  /// Runs the exact history and eval passes; keeps the residual entering each layer in
  /// `resume_layers` (any layer may be resumed from if the list is empty: all are kept).
  RequestProbe(const Model& model, std::span<const std::int32_t> history,
               std::span<const std::int32_t> eval, const std::vector<int>& resume_layers = {},
               const ProbeCapture& capture = {});

  const Model& model() const { return *model_; }
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

  /// The residual entering `layer` in the exact eval pass (a kept resume layer).
  const Matrix& exact_residual(int layer) const;

  /// As nll_with, from `x`, the residual entering `first_layer` in a pass whose cache agreed
  /// with `cache` below it; stores the residual entering each of `keep` at or above
  /// `first_layer` in `kept` (when given).
  std::vector<double> nll_from(Matrix x, KvCache cache, int first_layer,
                               const std::vector<int>& keep = {}, Residuals* kept = nullptr) const;

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

/// One request's passes over a sequence of topologies (the predictors whose target layers are
/// rebuilt), each started at the highest kept layer below which its cache equals the previous
/// pass's: the residual entering that layer is the same, so the NLL is the same as a pass from
/// the topology's first rebuilt layer. Predictors are told apart by address: they must outlive
/// the chain unchanged. Memory: one residual per kept layer.
class PassChain {
 public:
  /// `keep`: the layers whose residual is kept between passes (the probe's resume layers).
  PassChain(const RequestProbe& probe, std::vector<int> keep)
      : probe_(&probe), keep_(std::move(keep)) {}

  /// Per-token NLL of the eval tokens with the target layers of `groups` rebuilt (empty: exact).
  std::vector<double> nll(std::span<const GroupPredictor* const> groups);
  /// The layer the last pass started at (the model's layer count when it ran none).
  int last_start() const { return last_start_; }

 private:
  const RequestProbe* probe_;
  std::vector<int> keep_;
  std::vector<const GroupPredictor*> by_layer_;  // last pass: each layer's predictor (or null)
  Residuals residual_;                           // last pass: residual entering kept layers
  std::vector<double> last_nll_;
  int last_start_ = 0;
};

/// The straightforward pass PassChain must agree with: the exact cache with every group of
/// `groups` rebuilt in order, resumed at the first rebuilt layer.
std::vector<double> rebuilt_nll(const RequestProbe& probe,
                                std::span<const GroupPredictor* const> groups);

}  // namespace kvshift::backend::calibrate
