#include "testbed/continuation.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace kvshift::testbed {
namespace {

std::int32_t greedy(const backend::Matrix& logits) {
  Eigen::Index best = 0;
  logits.row(0).maxCoeff(&best);
  return static_cast<std::int32_t>(best);
}

/// The token whose cumulative softmax probability first reaches u (temperature 1).
std::int32_t sample(const backend::Matrix& logits, double u) {
  const auto row = logits.row(0).cast<double>();
  const double mx = row.maxCoeff();
  const Eigen::RowVectorXd p = (row.array() - mx).exp();
  const double target = u * p.sum();
  double acc = 0;
  for (Eigen::Index i = 0; i < p.size(); ++i) {
    acc += p[i];
    if (acc >= target) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(p.size() - 1);
}

/// `steps` tokens decoded from `cache` after `first`, each picked by `pick(logits, step)`.
template <typename Pick>
std::vector<std::int32_t> continue_from(const backend::Model& model, backend::KvCache cache,
                                        std::int32_t first, int steps, Pick&& pick) {
  std::vector<std::int32_t> out;
  std::int32_t token = first;
  for (int s = 0; s < steps; ++s) {
    backend::KvCache* caches[] = {&cache};
    token = pick(model.decode_step({&token, 1}, caches), s);
    out.push_back(token);
  }
  return out;
}

double mean_nll(const backend::Model& model, backend::KvCache cache,
                const std::vector<std::int32_t>& tokens) {
  const std::vector<double> nll = model.teacher_forced_nll(tokens, cache);
  double sum = 0;
  for (double v : nll) sum += v;
  return sum / static_cast<double>(nll.size());
}

double agreement(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i] ? 1 : 0;
  return static_cast<double>(same) / static_cast<double>(a.size());
}

}  // namespace

ContinuationQuality compare_continuations(const backend::Model& model,
                                          const backend::KvCache& source,
                                          const backend::KvCache& received, std::int32_t next_token,
                                          int steps, std::uint64_t seed,
                                          std::span<const std::int32_t> following) {
  if (steps < 1) throw std::invalid_argument("compare_continuations: steps must be >= 1");
  ContinuationQuality q;
  q.steps = steps;
  const auto by_greedy = [](const backend::Matrix& logits, int) { return greedy(logits); };
  const std::vector<std::int32_t> src = continue_from(model, source, next_token, steps, by_greedy);
  const std::vector<std::int32_t> dst =
      continue_from(model, received, next_token, steps, by_greedy);
  q.greedy_agreement = agreement(src, dst);
  q.greedy_first_difference = steps;
  for (int s = 0; s < steps; ++s) {
    if (src[static_cast<std::size_t>(s)] != dst[static_cast<std::size_t>(s)]) {
      q.greedy_first_difference = s;
      break;
    }
  }
  // One stream of uniform draws, the same for both sides.
  std::vector<double> u(static_cast<std::size_t>(steps));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (double& v : u) v = uniform(rng);
  const auto by_sample = [&u](const backend::Matrix& logits, int s) {
    return sample(logits, u[static_cast<std::size_t>(s)]);
  };
  q.sampled_agreement = agreement(continue_from(model, source, next_token, steps, by_sample),
                                  continue_from(model, received, next_token, steps, by_sample));
  // The source's greedy text, teacher-forced on both caches: [next, src...] scores src.
  std::vector<std::int32_t> text = {next_token};
  text.insert(text.end(), src.begin(), src.end());
  q.delta_nll = mean_nll(model, received, text) - mean_nll(model, source, text);
  q.text_delta_nll = std::nan("");
  if (following.size() >= 2) {
    const std::vector<std::int32_t> real(following.begin(), following.end());
    q.text_delta_nll = mean_nll(model, received, real) - mean_nll(model, source, real);
  }
  return q;
}

}  // namespace kvshift::testbed
