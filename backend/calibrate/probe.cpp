// Quality probes; see probe.hpp.
#include "backend/calibrate/probe.hpp"

#include <chrono>
#include <stdexcept>

namespace kvshift::backend::calibrate {

RequestProbe::RequestProbe(const Model& model, std::span<const std::int32_t> history,
                           std::span<const std::int32_t> eval,
                           const std::vector<int>& resume_layers, const ProbeCapture& capture)
    : model_(&model) {
  if (history.empty() || eval.empty()) {
    throw std::invalid_argument("RequestProbe: needs at least one history and one eval token");
  }
  const auto& spec = model.spec();
  cache_ = model.new_cache();
  if (history.size() > 1) {
    ForwardOptions o;
    o.logits = LogitsMode::kNone;
    o.attention_stats = capture.attention_stats;
    o.stats_window = capture.stats_window;
    const auto t0 = std::chrono::steady_clock::now();
    ForwardResult r = model.forward(history.first(history.size() - 1), cache_, o);
    history_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats_ = std::move(r.stats);
  }
  input_.push_back(history.back());
  input_.insert(input_.end(), eval.begin(), eval.end());
  targets_.assign(eval.begin(), eval.end());
  residual_.resize(spec.layers);
  std::vector<bool> keep(spec.layers, resume_layers.empty());
  for (int l : resume_layers) {
    if (l < 0 || l >= spec.layers) throw std::invalid_argument("RequestProbe: layer out of range");
    keep[l] = true;
  }
  const ModelWeights& w = model.weights();
  Matrix x(static_cast<Eigen::Index>(input_.size()), spec.hidden);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    if (input_[i] < 0 || input_[i] >= spec.vocab) {
      throw std::invalid_argument("RequestProbe: token id outside the vocabulary");
    }
    x.row(i) = w.embed.row(input_[i]);
  }
  KvCache work = cache_;  // the eval rows are appended here, cache_ stays the history
  for (int l = 0; l < spec.layers; ++l) {
    if (keep[l]) residual_[l] = x;
    model.run_layers(l, l + 1, x, work);
  }
  exact_nll_ = logits_nll(x);
}

double RequestProbe::exact_mean() const {
  double s = 0.0;
  for (double v : exact_nll_) s += v;
  return s / static_cast<double>(exact_nll_.size());
}

std::vector<double> RequestProbe::nll_with(KvCache cache, int first_layer) const {
  const auto& spec = model_->spec();
  if (first_layer < 0 || first_layer >= spec.layers || residual_[first_layer].size() == 0) {
    throw std::invalid_argument("RequestProbe: no residual kept for layer " +
                                std::to_string(first_layer));
  }
  Matrix x = residual_[first_layer];
  model_->run_layers(first_layer, spec.layers, x, cache);
  return logits_nll(x);
}

std::vector<double> RequestProbe::logits_nll(const Matrix& x) const {
  const ModelWeights& w = model_->weights();
  // The last input row predicts past the window: no logits for it.
  const Matrix logits =
      rms_norm(x.topRows(x.rows() - 1), w.final_norm, w.spec.rms_eps) * w.output().transpose();
  return next_token_nll(logits, targets_);
}

}  // namespace kvshift::backend::calibrate
