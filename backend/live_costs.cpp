// The live cost source; see live_costs.hpp.
#include "backend/live_costs.hpp"

#include <algorithm>
#include <cmath>

#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

constexpr std::int64_t kMinTokenBucket = 16;

/// The power of two at or below x (at least `floor`).
std::int64_t bucket_below(std::int64_t x, std::int64_t floor) {
  std::int64_t b = floor;
  while (b * 2 <= x) b *= 2;
  return b;
}

std::string weights_label(const ProfileInputs& in) {
  if (!in.target) return "seeded random weights";
  std::string s = "real weights of " + in.target_origin.path;
  if (in.predictors) s += ", predictors " + in.predictors_origin.path;
  if (in.mapper) s += ", mapper " + in.mapper_origin.path;
  return s;
}

}  // namespace

LiveCosts::LiveCosts(std::unique_ptr<Profiler> profiler, ProfileRequest request)
    : profiler_(std::move(profiler)), request_(std::move(request)) {
  label_ = "live (" + profiler_->backend_name() + ": " + profiler_->device_description() + "; " +
           weights_label(request_.inputs) + ")";
}

void LiveCosts::check_target(const cost_model::ModelSpec& m, const char* op) const {
  if (m.layers != request_.model.layers || m.hidden != request_.model.hidden) {
    throw std::invalid_argument(std::string("live ") + op + ": asked for " + m.name +
                                ", the live source runs " + request_.model.name);
  }
}

double LiveCosts::measured(const std::string& op, std::int64_t tokens, std::int64_t second) const {
  const std::lock_guard lock(mutex_);
  const Key key{op, tokens, second};
  if (auto it = rows_.find(key); it != rows_.end()) return it->second.median_s;
  ProfileRequest req = request_;
  req.ops = {op};
  req.tokens = {tokens};
  req.sharing = {op == "reconstruct" ? second : 1};
  req.decode_batches = {op == "decode" ? second : 1};
  req.decode_contexts = {tokens};
  for (const OpTiming& row : profiler_->run(req)) {
    if (row.op == op) rows_[key] = row;
  }
  if (!rows_.count(key)) {
    throw std::logic_error("live " + op + ": the " + profiler_->backend_name() +
                           " profiler measured nothing for this shape");
  }
  return rows_.at(key).median_s;
}

double LiveCosts::along_tokens(const std::string& op, std::int64_t t, std::int64_t second) const {
  const std::int64_t lo = bucket_below(t, kMinTokenBucket);
  const double a = measured(op, lo, second);
  if (t <= lo) return a * static_cast<double>(t) / static_cast<double>(lo);
  const double b = measured(op, lo * 2, second);
  return cost_model::interpolate_log_log({{double(lo), a}, {double(lo * 2), b}}, double(t));
}

double LiveCosts::bucketed(const std::string& op, std::int64_t t, std::int64_t second) const {
  if (op == "decode") {
    // Keep the measured caches within memory: past the largest batch that fits, extend the
    // power law of the two largest measured batches (one batch: proportionally).
    const auto& m = request_.model;
    const double per_request = 2.0 * m.layers * m.kv_heads * m.head_dim * 4.0 *
                               static_cast<double>(bucket_below(t, kMinTokenBucket) * 2);
    std::int64_t fits = 1;
    while (fits * 2 * per_request <= kMaxDecodeKvBytes) fits *= 2;
    if (second > fits) {
      {
        const std::lock_guard lock(mutex_);
        ++extrapolated_[op];
      }
      std::vector<std::pair<double, double>> points;
      if (fits >= 2) points.push_back({double(fits / 2), along_tokens(op, t, fits / 2)});
      points.push_back({double(fits), along_tokens(op, t, fits)});
      return cost_model::interpolate_log_log(points, double(second));
    }
  }
  const std::int64_t lo = bucket_below(second, 1);
  const double a = along_tokens(op, t, lo);
  if (second <= lo) return a;
  const double b = along_tokens(op, t, lo * 2);
  return cost_model::interpolate_log_log({{double(lo), a}, {double(lo * 2), b}}, double(second));
}

Seconds LiveCosts::prefill(const cost_model::ModelSpec& m, std::int64_t tokens) const {
  check_target(m, "prefill");
  return {bucketed("prefill", tokens, 1)};
}

Seconds LiveCosts::decode_step(const cost_model::ModelSpec& m, std::int64_t batch,
                               std::int64_t context_tokens) const {
  check_target(m, "decode");
  const std::int64_t b = std::max<std::int64_t>(batch, 1);
  return {bucketed("decode", std::max<std::int64_t>(1, context_tokens / b), b)};
}

Seconds LiveCosts::reconstruct(const cost_model::ModelSpec& m, const cost_model::OmissionPlan& t,
                               std::int64_t tokens, std::int64_t requests,
                               cost_model::DType) const {
  check_target(m, "reconstruct");
  if (t.empty()) return {0};
  if (t.groups().size() != request_.omission.groups().size()) {
    throw std::invalid_argument("live reconstruct: asked for " + t.describe() +
                                ", the live source holds predictors for " +
                                request_.omission.describe());
  }
  return {bucketed("reconstruct", tokens, std::max<std::int64_t>(requests, 1))};
}

Seconds LiveCosts::proxy_score(const cost_model::ModelSpec& proxy, const cost_model::ModelSpec&,
                               std::int64_t tokens) const {
  if (!request_.proxy || proxy.layers != request_.proxy->layers ||
      proxy.hidden != request_.proxy->hidden) {
    throw std::invalid_argument("live proxy_score: asked for proxy " + proxy.name +
                                ", the live source runs " +
                                (request_.proxy ? request_.proxy->name : std::string("none")));
  }
  return {bucketed("proxy_score", tokens, 1)};
}

Seconds LiveCosts::prune(const cost_model::ModelSpec& m, std::int64_t tokens,
                         double retention) const {
  check_target(m, "prune");
  // Measured at the request's ρ; another ρ scales by the bytes moved, as a table does.
  return {(1.0 + retention) / (1.0 + request_.retention) * bucketed("prune", tokens, 1)};
}

std::vector<OpTiming> LiveCosts::measured_rows() const {
  const std::lock_guard lock(mutex_);
  std::vector<OpTiming> out;
  for (const auto& [key, row] : rows_) out.push_back(row);
  return out;
}

std::vector<cost_model::OpSource> LiveCosts::sources() const {
  const std::lock_guard lock(mutex_);
  std::vector<cost_model::OpSource> out;
  for (const std::string& op : cost_model::compute_ops()) {
    cost_model::OpSource s{op, label_, 0, 0};
    for (const auto& [key, row] : rows_) {
      if (row.op != op) continue;
      ++s.measurements;
      s.spread = std::max(s.spread, (row.p90_s - row.p10_s) / row.median_s);
    }
    if (auto it = extrapolated_.find(op); it != extrapolated_.end()) {
      s.source += "; " + std::to_string(it->second) +
                  " steps extended past the batch measured within 4 GiB of KV";
    }
    const auto notes = profiler_->notes();
    if (auto it = notes.find(op); it != notes.end()) s.source += "; " + it->second;
    if (s.measurements == 0) s.source += " (not needed by this run)";
    out.push_back(s);
  }
  return out;
}

}  // namespace kvshift::backend
