// Probes are the backend's forward: the exact NLL equals Model::teacher_forced_nll,
// resuming at a layer with the exact cache reproduces it, and resuming with a
// reconstructed cache equals a full forward over that cache, and a chain of passes
// that starts each one where its cache first differs from the previous gives the
// same NLL as passes from the first rebuilt layer.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "backend/calibrate/probe.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/omission_plan.hpp"
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
  const auto topo = cost_model::OmissionPlan::from_groups(8, {3});  // layers 4-5, anchors 2,3,6,7
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

TEST(Probe, APredictorWhoseSinkRowsCoverTheHistoryChangesNothing) {
  const Model model(random_weights(spec(), 4));
  const auto t = tokens(48, 2);
  const std::span<const std::int32_t> hist(t.data(), 32), eval(t.data() + 32, 16);
  const RequestProbe probe(model, hist, eval, {4});
  const auto topo = cost_model::OmissionPlan::from_groups(8, {3});
  GroupPredictor p = random_predictor(model.spec(), topo.groups().front(), 9);
  const GroupPredictor* one[] = {&p};
  const double exact = std::accumulate(probe.exact_nll().begin(), probe.exact_nll().end(), 0.0);
  auto total = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  // Every cached row sent exact: the NLL is the exact one. One row fewer: it moves.
  p.sink_rows = static_cast<int>(probe.exact_cache().tokens());
  EXPECT_DOUBLE_EQ(total(rebuilt_nll(probe, one)), exact);
  p.sink_rows -= 1;
  EXPECT_NE(total(rebuilt_nll(probe, one)), exact);
}

TEST(Probe, BlockedHeadNllEqualsTheNllOverTheWholeLogits) {
  // A vocabulary that is not a multiple of the block, rows not a multiple of any tile. Small
  // integer entries keep every float logit exact whichever GEMM kernel path computes it, so
  // only the blocked softmax (in double) is under test.
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> small(-3, 3);
  const auto entry = [&] { return static_cast<float>(small(rng)); };
  const Matrix h = Matrix::NullaryExpr(37, 24, entry);
  const Matrix w = Matrix::NullaryExpr(5000, 24, entry);
  std::vector<std::int32_t> targets(37);
  for (auto& t : targets) t = static_cast<std::int32_t>(rng() % 5000);
  targets[0] = 0, targets[1] = 4999, targets[2] = 2048;  // first, last, a block's first column
  const Matrix logits = h * w.transpose();
  const std::vector<double> whole = next_token_nll(logits, targets);
  const std::vector<double> blocked = head_nll(h, w, targets);
  ASSERT_EQ(whole.size(), blocked.size());
  double norm = 0.0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    norm += std::abs(whole[i]);
    EXPECT_NEAR(blocked[i], whole[i], 1e-12 * std::max(1.0, std::abs(whole[i]))) << "row " << i;
  }
  EXPECT_GT(norm, 0.0);
  EXPECT_THROW(head_nll(h, w, std::span(targets).first(36)), std::invalid_argument);
}

TEST(Probe, AChainOfPassesGivesTheSameNllAsPassesFromTheFirstRebuiltLayer) {
  // 12 layers in 2-layer groups 1..6; every group start is a resume layer.
  const cost_model::ModelSpec m = testing::tiny_spec("tiny12", {.layers = 12});
  const Model model(random_weights(m, 5));
  const auto t = tokens(60, 3);
  const std::vector<int> starts = {2, 4, 6, 8};
  const RequestProbe probe(model, std::span(t).first(40), std::span(t).last(20), starts);
  // A prefix chain as the selection measures it, a repeat, other sets and exact. Adding G4
  // between G3 and G5 changes both neighbours' anchors, so their predictors change too.
  const std::vector<std::vector<int>> topologies = {{3},       {3, 5}, {3, 5, 4}, {3, 5, 4},
                                                    {2, 3, 5}, {5},    {},        {4}};
  std::map<std::pair<int, std::vector<int>>, GroupPredictor> fitted;
  PassChain chain(probe, starts);
  std::vector<int> chain_starts;
  for (const auto& groups : topologies) {
    std::vector<const GroupPredictor*> ps;
    if (!groups.empty()) {
      const auto topo = cost_model::OmissionPlan::from_groups(12, groups);
      for (const auto& plan : topo.groups()) {
        const auto key = std::make_pair(plan.group, plan.anchor_layers);
        if (!fitted.contains(key)) fitted.emplace(key, random_predictor(m, plan, 11 + plan.group));
        ps.push_back(&fitted.at(key));
      }
    }
    const std::vector<double> chained = chain.nll(ps);
    const std::vector<double> straight = rebuilt_nll(probe, ps);
    ASSERT_EQ(chained.size(), straight.size());
    const double exact = std::accumulate(probe.exact_nll().begin(), probe.exact_nll().end(), 0.0);
    const double d_chained = std::accumulate(chained.begin(), chained.end(), 0.0) - exact;
    const double d_straight = std::accumulate(straight.begin(), straight.end(), 0.0) - exact;
    EXPECT_NEAR(d_chained, d_straight, 1e-6 * std::abs(d_straight)) << "groups " << groups.size();
    for (std::size_t i = 0; i < chained.size(); ++i) {
      EXPECT_EQ(chained[i], straight[i]) << "token " << i << ", topology " << chain_starts.size();
    }
    chain_starts.push_back(chain.last_start());
  }
  // {3,5} starts at G5 (layer 8); {3,5,4} at G3 (its anchors changed); the repeat runs
  // nothing; {2,3,5} and {5} differ from their predecessors at layer 2, so each starts at its
  // own first rebuilt layer; exact runs nothing and forgets; {4} starts at its own layer.
  EXPECT_EQ(chain_starts, (std::vector<int>{4, 8, 4, 12, 2, 8, 12, 6}));
}

}  // namespace
}  // namespace kvshift::backend::calibrate
