// Quality probes; see probe.hpp.
#include "backend/calibrate/probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvshift::backend::calibrate {
namespace {

// Vocabulary columns per block: [E, 2048] fp32 logits stay in the last-level cache. A
// multiple of every GEMM register tile, so each logit takes the same path as in one product.
constexpr Eigen::Index kVocabBlock = 2048;

}  // namespace

std::vector<double> head_nll(const Matrix& h, const Matrix& w_out,
                             std::span<const std::int32_t> targets) {
  const Eigen::Index rows = h.rows(), vocab = w_out.rows();
  if (static_cast<std::size_t>(rows) != targets.size() || h.cols() != w_out.cols()) {
    throw std::invalid_argument("head_nll: one target per row and matching widths needed");
  }
  for (std::int32_t t : targets) {
    if (t < 0 || t >= vocab) {
      throw std::invalid_argument("head_nll: target token " + std::to_string(t) +
                                  " outside the vocabulary");
    }
  }
  // Per row: the running max m, sum of exp(logit − m) and the target's logit, all in double.
  std::vector<double> mx(rows, -std::numeric_limits<double>::infinity()), sum(rows, 0.0),
      target(rows, 0.0);
  Matrix logits;
  Eigen::ArrayXd row;
  for (Eigen::Index c0 = 0; c0 < vocab; c0 += kVocabBlock) {
    const Eigen::Index cols = std::min(kVocabBlock, vocab - c0);
    logits.noalias() = h * w_out.middleRows(c0, cols).transpose();
    for (Eigen::Index i = 0; i < rows; ++i) {
      row = logits.row(i).transpose().cast<double>();
      const double m = std::max(mx[i], row.maxCoeff());
      sum[i] = sum[i] * std::exp(mx[i] - m) + (row - m).exp().sum();
      mx[i] = m;
      const Eigen::Index t = targets[static_cast<std::size_t>(i)] - c0;
      if (t >= 0 && t < cols) target[i] = row[t];
    }
  }
  std::vector<double> out(rows);
  for (Eigen::Index i = 0; i < rows; ++i) out[i] = mx[i] + std::log(sum[i]) - target[i];
  return out;
}

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
    o.stats = capture.stats;
    const auto t0 = std::chrono::steady_clock::now();
    ForwardResult r = model.forward(history.first(history.size() - 1), cache_, o);
    history_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  if (history.size() == 1 && spec.bos_token >= 0) input_[0] = spec.bos_token;  // position 0
  for (const std::int32_t id : input_) {
    if (id < 0 || id >= spec.vocab) {
      throw std::invalid_argument("RequestProbe: token id outside the vocabulary");
    }
  }
  Matrix x = model.embed_tokens(input_);
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

const Matrix& RequestProbe::exact_residual(int layer) const {
  if (layer < 0 || layer >= model_->spec().layers || residual_[layer].size() == 0) {
    throw std::invalid_argument("RequestProbe: no residual kept for layer " +
                                std::to_string(layer));
  }
  return residual_[layer];
}

std::vector<double> RequestProbe::nll_with(KvCache cache, int first_layer) const {
  Matrix x = exact_residual(first_layer);
  model_->run_layers(first_layer, model_->spec().layers, x, cache);
  return logits_nll(x);
}

std::vector<double> RequestProbe::nll_from(Matrix x, KvCache cache, int first_layer,
                                           const std::vector<int>& keep, Residuals* kept) const {
  const int layers = model_->spec().layers;
  if (first_layer < 0 || first_layer >= layers ||
      x.rows() != static_cast<Eigen::Index>(input_.size())) {
    throw std::invalid_argument("RequestProbe::nll_from: bad resume layer or residual");
  }
  // Layer by layer is the same arithmetic as one run_layers call over the range.
  int from = first_layer;
  auto run_to = [&](int to) {
    if (to > from) model_->run_layers(from, to, x, cache);
    from = to;
  };
  if (kept) {
    std::vector<int> stops = keep;
    std::sort(stops.begin(), stops.end());
    for (int l : stops) {
      if (l < first_layer || l >= layers) continue;
      run_to(l);
      (*kept)[l] = x;
    }
  }
  run_to(layers);
  return logits_nll(x);
}

std::vector<double> RequestProbe::logits_nll(const Matrix& x) const {
  const ModelWeights& w = model_->weights();
  // The last input row predicts past the window: no logits for it.
  return head_nll(rms_norm(x.topRows(x.rows() - 1), w.final_norm, w.spec.rms_eps), w.output(),
                  targets_);
}

std::vector<double> rebuilt_nll(const RequestProbe& probe,
                                std::span<const GroupPredictor* const> groups) {
  const auto& spec = probe.model().spec();
  KvCache cache = probe.exact_cache();
  KvCache* ptr = &cache;
  int first = spec.layers;
  for (const GroupPredictor* g : groups) {
    reconstruct_group(*g, std::span<KvCache* const>(&ptr, 1), spec);
    first = std::min(first, g->target_layers.front());
  }
  if (first == spec.layers) return probe.exact_nll();
  return probe.nll_with(std::move(cache), first);
}

std::vector<double> PassChain::nll(std::span<const GroupPredictor* const> groups) {
  const auto& spec = probe_->model().spec();
  const int layers = spec.layers;
  std::vector<const GroupPredictor*> by_layer(layers, nullptr);
  std::vector<bool> anchor(layers, false);
  int first = layers;
  for (const GroupPredictor* g : groups) {
    for (int l : g->target_layers) {
      if (l < 0 || l >= layers || by_layer[l]) {
        throw std::invalid_argument("PassChain: a layer out of range or rebuilt twice");
      }
      by_layer[l] = g;
      first = std::min(first, l);
    }
    for (int a : g->anchor_layers) anchor.at(a) = true;
  }
  if (first == layers) {
    last_start_ = layers;
    by_layer_.clear(), residual_.clear(), last_nll_.clear();
    return probe_->exact_nll();
  }
  // Below `same` both passes' caches agree; a residual kept at l <= same is valid for this one.
  int same = 0;
  if (!by_layer_.empty()) {
    while (same < layers && by_layer_[same] == by_layer[same]) ++same;
  }
  if (same == layers) {
    last_start_ = layers;
    return last_nll_;
  }
  int start = first;
  for (const auto& [l, x] : residual_) {
    if (l <= same) start = std::max(start, l);
  }
  KvCache cache = probe_->exact_cache();
  KvCache* ptr = &cache;
  // A group wholly below the start is never read, unless its layers anchor another group.
  for (const GroupPredictor* g : groups) {
    const bool read = g->target_layers.back() >= start ||
                      std::any_of(g->target_layers.begin(), g->target_layers.end(),
                                  [&](int l) { return anchor[l]; });
    if (read) reconstruct_group(*g, std::span<KvCache* const>(&ptr, 1), spec);
  }
  Matrix x = start == first || !residual_.contains(start) ? probe_->exact_residual(start)
                                                          : residual_.at(start);
  Residuals kept;
  for (auto& [l, r] : residual_) {
    if (l < start && l <= same) kept.emplace(l, std::move(r));
  }
  last_nll_ = probe_->nll_from(std::move(x), std::move(cache), start, keep_, &kept);
  residual_ = std::move(kept);
  by_layer_ = std::move(by_layer);
  last_start_ = start;
  return last_nll_;
}

}  // namespace kvshift::backend::calibrate
