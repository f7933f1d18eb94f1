// What a move did to the text (testbed/continuation.hpp) on the tiny fixture: the same KV
// continues the same way (agreement 1, ΔNLL 0, on its own text and on given text), damaged
// KV costs NLL on the source's text and changes it on given text, and one seed gives one
// answer.
#include "testbed/continuation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/weights.hpp"

namespace kvshift::testbed {
namespace {

struct Fixture {
  backend::Model model{
      backend::load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama")};
  backend::KvCache cache = model.new_cache();
  Fixture() {
    const std::vector<std::int32_t> context = {3, 17, 42, 8, 91, 5, 60, 33, 12, 77, 1, 29, 64, 2};
    backend::ForwardOptions o;
    o.logits = backend::LogitsMode::kNone;
    model.forward(context, cache, o);
  }
};

TEST(Continuation, TheSameKvContinuesTheSameWay) {
  const Fixture f;
  const ContinuationQuality q = compare_continuations(f.model, f.cache, f.cache, 54, 16, 7);
  EXPECT_EQ(q.steps, 16);
  EXPECT_EQ(q.greedy_agreement, 1.0);
  EXPECT_EQ(q.greedy_first_difference, 16);
  EXPECT_EQ(q.sampled_agreement, 1.0);
  EXPECT_EQ(q.delta_nll, 0.0);
  EXPECT_TRUE(std::isnan(q.text_delta_nll));  // no text after the context given
  const std::vector<std::int32_t> after = {7, 19, 23, 4, 88};
  EXPECT_EQ(compare_continuations(f.model, f.cache, f.cache, 54, 4, 7, after).text_delta_nll, 0.0);
}

TEST(Continuation, DamagedKvCostsNllOnTheSourcesTextAndOneSeedGivesOneAnswer) {
  const Fixture f;
  backend::KvCache damaged = f.cache;
  for (auto& layer : damaged.v) layer *= 0.25f;  // every value shrunk: attention outputs shrink
  const ContinuationQuality a = compare_continuations(f.model, f.cache, damaged, 54, 16, 7);
  const ContinuationQuality b = compare_continuations(f.model, f.cache, damaged, 54, 16, 7);
  EXPECT_GT(a.delta_nll, 0.0);  // the receiver finds the source's greedy text less likely
  EXPECT_LT(a.greedy_agreement, 1.0);
  EXPECT_GE(a.greedy_agreement, 0.0);
  EXPECT_LT(a.greedy_first_difference, 16);
  EXPECT_EQ(a.delta_nll, b.delta_nll);
  const std::vector<std::int32_t> after = {7, 19, 23, 4, 88};
  EXPECT_NE(compare_continuations(f.model, f.cache, damaged, 54, 4, 7, after).text_delta_nll, 0.0);
  EXPECT_EQ(a.sampled_agreement, b.sampled_agreement);
  EXPECT_THROW(compare_continuations(f.model, f.cache, damaged, 54, 0, 7), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::testbed
