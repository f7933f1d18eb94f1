// Samplers and the request stream (see workload.hpp for the determinism rules).
#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace kvshift::sim {

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<std::int64_t>(engine_());  // full 64-bit range
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % span;
  std::uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return lo + static_cast<std::int64_t>(x % span);
}

double Rng::exponential(double rate) { return -std::log(uniform_open0()) / rate; }

double Rng::normal() {
  if (spare_normal_) {
    const double z = *spare_normal_;
    spare_normal_.reset();
    return z;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double f = std::sqrt(-2.0 * std::log(s) / s);
  spare_normal_ = v * f;
  return u * f;
}

double Rng::gamma(double shape, double scale) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) · U^(1/a).
    return gamma(shape + 1.0, scale) * std::pow(uniform_open0(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform_open0();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
  }
}

double Rng::lognormal_mean_cv(double mean, double cv) {
  const double sigma2 = std::log1p(cv * cv);
  const double mu = std::log(mean) - 0.5 * sigma2;
  return std::exp(mu + std::sqrt(sigma2) * normal());
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::int64_t sample_tokens(const TokenDist& d, Rng& rng) {
  switch (d.kind) {
    case TokenDistKind::kFixed:
      return d.value;
    case TokenDistKind::kUniform:
      return rng.uniform_int(d.min, d.max);
    case TokenDistKind::kLognormal: {
      const double x = std::round(rng.lognormal_mean_cv(d.mean, d.cv));
      if (!(x >= static_cast<double>(d.min))) return d.min;  // also catches NaN
      if (x >= static_cast<double>(d.max)) return d.max;
      return static_cast<std::int64_t>(x);
    }
  }
  return d.value;
}

Workload::Workload(const WorkloadSpec& spec, std::uint64_t seed, Seconds horizon,
                   std::vector<DeploymentDraw> deployments)
    : spec_(&spec),
      horizon_ns_(static_cast<std::int64_t>(std::llround(horizon.value * 1e9))),
      arrivals_(derive_seed(seed, 1)),
      tokens_(derive_seed(seed, 2)),
      prefixes_(derive_seed(seed, 3)),
      deployment_draws_(derive_seed(seed, 4)),
      deployments_(std::move(deployments)) {
  for (std::size_t d = 0; d < deployments_.size(); ++d) {
    own_tokens_.emplace_back(derive_seed(seed, 16 + d));
  }
}

Workload scenario_workload(const SimulationSpec& spec) {
  std::vector<DeploymentDraw> draws;
  for (const DeploymentSpec& d : spec.deployments)
    draws.push_back({d.share, d.prompt_tokens, d.output_tokens});
  return Workload(spec.workload, derive_seed(spec.seed, 1), spec.duration, std::move(draws));
}

int Workload::draw_deployment() {
  if (deployments_.size() < 2) return 0;
  const double u = deployment_draws_.uniform();
  double below = 0;
  for (std::size_t d = 0; d + 1 < deployments_.size(); ++d) {
    below += deployments_[d].share;
    if (u < below) return static_cast<int>(d);
  }
  return static_cast<int>(deployments_.size() - 1);
}

std::optional<RequestArrival> Workload::next() {
  if (spec_->max_requests > 0 && next_id_ >= static_cast<std::uint64_t>(spec_->max_requests)) {
    return std::nullopt;
  }
  auto r = spec_->arrival == ArrivalKind::kTrace ? next_from_trace() : next_generated();
  if (r) ++next_id_;
  return r;
}

std::optional<RequestArrival> Workload::next_generated() {
  if (!(spec_->rate_per_s > 0)) return std::nullopt;
  double gap_s;
  if (spec_->arrival == ArrivalKind::kPoisson) {
    gap_s = arrivals_.exponential(spec_->rate_per_s);
  } else {
    // Gamma renewal process: shape k = 1/cv², scale 1/(rate·k) -> mean 1/rate, CV cv.
    const double k = 1.0 / (spec_->cv * spec_->cv);
    gap_s = arrivals_.gamma(k, 1.0 / (spec_->rate_per_s * k));
  }
  const double gap_ns = std::round(gap_s * 1e9);
  if (gap_ns >= static_cast<double>(horizon_ns_ - clock_ns_)) return std::nullopt;
  clock_ns_ += static_cast<std::int64_t>(gap_ns);
  RequestArrival r;
  r.id = next_id_;
  r.arrival_ns = clock_ns_;
  r.prompt_tokens = sample_tokens(spec_->prompt_tokens, tokens_);
  r.output_tokens = sample_tokens(spec_->output_tokens, tokens_);
  r.deployment = draw_deployment();
  // A deployment's own lengths come from a stream of its own; the workload's are drawn for
  // every arrival all the same, so the other deployments' lengths stay as they were.
  if (!deployments_.empty()) {
    const auto d = static_cast<std::size_t>(r.deployment);
    const DeploymentDraw& own = deployments_[d];
    if (own.prompt_tokens) r.prompt_tokens = sample_tokens(*own.prompt_tokens, own_tokens_[d]);
    if (own.output_tokens) r.output_tokens = sample_tokens(*own.output_tokens, own_tokens_[d]);
  }
  if (const auto& p = spec_->shared_prefix; p && p->share > 0) {
    // Two draws a request whether it shares or not: the choice of one request never shifts
    // another's, and arrivals and lengths (streams 1 and 2) are those of the same workload
    // without shared prefixes.
    const bool shares = prefixes_.uniform() < p->share;
    const std::int64_t group = prefixes_.uniform_int(0, p->groups - 1);
    if (shares) {
      r.prefix_group = group;
      r.prefix_tokens = std::min(p->tokens, r.prompt_tokens);
    }
  }
  return r;
}

std::optional<RequestArrival> Workload::next_from_trace() {
  if (trace_pos_ >= spec_->trace.size()) return std::nullopt;
  const TraceRequest& t = spec_->trace[trace_pos_];
  const double ns = std::round(t.arrival.value * spec_->time_scale * 1e9);
  if (!(ns < static_cast<double>(horizon_ns_))) return std::nullopt;
  ++trace_pos_;
  RequestArrival r;
  r.id = next_id_;
  r.arrival_ns = static_cast<std::int64_t>(ns);
  r.prompt_tokens = t.prompt_tokens;
  r.output_tokens = t.output_tokens;
  r.block_hashes = &t.block_hashes;
  r.deployment = t.deployment >= 0 ? t.deployment : draw_deployment();
  return r;
}

std::vector<RequestArrival> generate_requests(const WorkloadSpec& spec, std::uint64_t seed,
                                              Seconds horizon,
                                              std::vector<DeploymentDraw> deployments) {
  Workload w(spec, seed, horizon, std::move(deployments));
  std::vector<RequestArrival> out;
  while (auto r = w.next()) out.push_back(*r);
  return out;
}

}  // namespace kvshift::sim
