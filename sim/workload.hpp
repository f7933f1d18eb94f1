// Workload: the deterministic request stream of a scenario. Arrivals come
// from a Poisson process, a gamma renewal process (inter-arrival CV != 1 for
// bursty traffic) or a replayed trace; prompt and output lengths from fixed,
// uniform or lognormal distributions. Same spec and seed -> the same stream on
// every machine: the generator is std::mt19937_64 (its output sequence is
// fixed by the C++ standard) and every distribution is sampled here from
// uniform doubles (53 random bits), never with std:: distributions, whose
// algorithms differ between standard libraries. Arrival times are integer
// nanoseconds. A share of generated requests may open with a common prefix
// (one of a few groups), as system prompts and templates do. Leaves out:
// diurnal rate changes, per-tenant mixes.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "sim/spec.hpp"

namespace kvshift::sim {

/// One generated request.
struct RequestArrival {
  std::uint64_t id = 0;         ///< 0, 1, 2, ... in arrival order
  std::int64_t arrival_ns = 0;  ///< simulated time of arrival
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  /// Generated shared prefix: which of the workload's groups (-1: none) and its tokens.
  std::int64_t prefix_group = -1;
  std::int64_t prefix_tokens = 0;
  /// Replayed trace: the keys of the prompt's leading blocks (the trace outlives the stream).
  const std::vector<std::uint64_t>* block_hashes = nullptr;
  int deployment = 0;  ///< which of the scenario's deployments serves it
};

/// A deployment's part of the arrivals: its share of those that name none and, for generated
/// arrivals, its own lengths (empty: the workload's).
struct DeploymentDraw {
  double share = 1;
  std::optional<TokenDist> prompt_tokens, output_tokens;
};

/// Seeded random source with hand-written samplers (portable across standard libraries).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform();
  /// Uniform double in (0, 1]: safe for log().
  double uniform_open0() { return 1.0 - uniform(); }
  /// Integer uniform in [lo, hi] (inclusive), unbiased (rejection sampling).
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  /// Exponential with the given rate (mean 1/rate).
  double exponential(double rate);
  /// Standard normal (Marsaglia polar method).
  double normal();
  /// Gamma(shape, scale) (Marsaglia-Tsang; shape < 1 by the u^(1/shape) boost).
  double gamma(double shape, double scale);
  /// Lognormal with the given mean and coefficient of variation.
  double lognormal_mean_cv(double mean, double cv);

 private:
  std::mt19937_64 engine_;
  std::optional<double> spare_normal_;
};

/// Derives an independent stream seed from a scenario seed and a stream number (splitmix64).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream);

/// Samples one token count from `d`.
std::int64_t sample_tokens(const TokenDist& d, Rng& rng);

/// Pull-based request stream: arrivals in [0, horizon), at most max_requests.
class Workload {
 public:
  /// `deployments`: each deployment's part of the arrivals (empty or one: every arrival is
  /// deployment 0's). With two or more, each arrival that names none takes one draw of a
  /// stream of its own, and a deployment's own lengths come from another, so arrivals and the
  /// workload's lengths stay those of the single-model stream.
  Workload(const WorkloadSpec& spec, std::uint64_t seed, Seconds horizon,
           std::vector<DeploymentDraw> deployments = {});
  /// The next request, or nullopt when the stream has ended.
  std::optional<RequestArrival> next();
  /// Requests produced so far.
  std::uint64_t produced() const { return next_id_; }

 private:
  std::optional<RequestArrival> next_generated();
  std::optional<RequestArrival> next_from_trace();
  int draw_deployment();

  const WorkloadSpec* spec_;
  std::int64_t horizon_ns_;
  Rng arrivals_;
  Rng tokens_;
  Rng prefixes_;          ///< shared-prefix choices, a stream of their own
  Rng deployment_draws_;  ///< deployment choices, a stream of their own
  std::vector<DeploymentDraw> deployments_;
  std::vector<Rng> own_tokens_;  ///< per deployment: its own lengths' stream
  std::int64_t clock_ns_ = 0;    ///< generated arrivals: time of the last arrival
  std::size_t trace_pos_ = 0;
  std::uint64_t next_id_ = 0;
};

/// The arrivals a run of `spec` simulates, drawn as the serving model draws them: the
/// scenario's seed and duration, its deployments' shares and lengths. The testbed takes its
/// moves' contexts from the same stream.
Workload scenario_workload(const SimulationSpec& spec);

/// The whole stream at once (for tests and small scenarios).
std::vector<RequestArrival> generate_requests(const WorkloadSpec& spec, std::uint64_t seed,
                                              Seconds horizon,
                                              std::vector<DeploymentDraw> deployments = {});

}  // namespace kvshift::sim
