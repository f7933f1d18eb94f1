// Probes are the backend's forward: the exact NLL equals Model::teacher_forced_nll,
// resuming at a layer with the exact cache reproduces it, and resuming with a
// reconstructed cache equals a full forward over that cache.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "backend/calibrate/probe.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/topology.hpp"
#include "tests/backend/tiny_spec.hpp"

namespace kvshift::backend::calibrate {
namespace {

cost_model::ModelSpec spec() { return testing::tiny_spec("tiny8", {.layers = 8}); }

std::vector<std::int32_t> tokens(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % 64);
  return t;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "token " << i;
}

TEST(Probe, ExactNllEqualsTheBackendsTeacherForcedNll) {
  const Model model(random_weights(spec(), 3));
  const auto t = tokens(40, 1);
  const std::span<const std::int32_t> hist(t.data(), 24), eval(t.data() + 24, 16);
  const RequestProbe probe(model, hist, eval);
  KvCache cache = model.new_cache();
  ForwardOptions o;
  o.logits = LogitsMode::kNone;
  model.forward(hist.first(23), cache, o);
  std::vector<std::int32_t> in{hist.back()};
  in.insert(in.end(), eval.begin(), eval.end());
  expect_close(probe.exact_nll(), model.teacher_forced_nll(in, cache), 1e-4);
  EXPECT_EQ(probe.exact_cache().tokens(), 23);
  for (int l : {0, 3, 7})
    expect_close(probe.nll_with(probe.exact_cache(), l), probe.exact_nll(), 1e-5);
}

TEST(Probe, ResumingWithAReconstructedCacheEqualsAFullForward) {
  const Model model(random_weights(spec(), 4));
  const auto t = tokens(48, 2);
  const std::span<const std::int32_t> hist(t.data(), 32), eval(t.data() + 32, 16);
  const RequestProbe probe(model, hist, eval, {4});
  const auto topo = cost_model::Topology::from_groups(8, {3});  // layers 4-5, anchors 2,3,6,7
  const GroupPredictor p = random_predictor(model.spec(), topo.groups().front(), 9);
  KvCache rebuilt = probe.exact_cache();
  KvCache* ptr = &rebuilt;
  reconstruct_group(p, std::span<KvCache* const>(&ptr, 1), model.spec());
  const std::vector<double> resumed = probe.nll_with(rebuilt, 4);
  std::vector<std::int32_t> in{hist.back()};
  in.insert(in.end(), eval.begin(), eval.end());
  KvCache full = rebuilt;
  expect_close(resumed, model.teacher_forced_nll(in, full), 1e-4);
  const double diff =
      std::abs(std::accumulate(resumed.begin(), resumed.end(), 0.0) -
               std::accumulate(probe.exact_nll().begin(), probe.exact_nll().end(), 0.0));
  EXPECT_GT(diff, 1e-3) << "a random predictor should change the NLL";
  EXPECT_THROW(probe.nll_with(rebuilt, 2), std::invalid_argument);  // layer 2 was not kept
}

}  // namespace
}  // namespace kvshift::backend::calibrate
