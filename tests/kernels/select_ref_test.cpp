// CPU top-K and KV gather: ties, keep-all, keep-none, forced sink/recent
// tokens, ascending output, and compaction by per-head indices.
#include <gtest/gtest.h>

#include <vector>

#include "host_tensor.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using testing::HostTensor;

std::vector<int> run_top_k(const std::vector<float>& scores, std::int64_t keep, std::int64_t sink,
                           std::int64_t recent) {
  const auto n = static_cast<std::int64_t>(scores.size());
  HostTensor s(DType::kF32, {1, n}), idx(DType::kI32, {1, keep});
  for (std::int64_t i = 0; i < n; ++i) s.set(i, scores[i]);
  cpu::top_k({s.view(), idx.view(), sink, recent});
  std::vector<int> out;
  for (std::int64_t j = 0; j < keep; ++j) out.push_back(idx.geti(j));
  return out;
}

TEST(TopKRef, KeepsTheLargestInAscendingTokenOrder) {
  EXPECT_EQ(run_top_k({0.1f, 0.9f, 0.5f, 0.7f, 0.2f}, 3, 0, 0), (std::vector<int>{1, 2, 3}));
}

TEST(TopKRef, TiesGoToTheLowerIndex) {
  EXPECT_EQ(run_top_k({0.5f, 0.5f, 0.5f, 0.5f}, 2, 0, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(run_top_k({0.1f, 0.5f, 0.9f, 0.5f, 0.5f}, 3, 0, 0), (std::vector<int>{1, 2, 3}));
}

TEST(TopKRef, KeepAllAndKeepNone) {
  EXPECT_EQ(run_top_k({3, 1, 2}, 3, 0, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(run_top_k({3, 1, 2}, 0, 0, 0).empty());
}

TEST(TopKRef, SinkAndRecentTokensAreAlwaysKept) {
  // Token 0 (sink) and token 5 (recent) have the lowest scores but stay.
  EXPECT_EQ(run_top_k({-9, 4, 1, 3, 2, -8}, 4, 1, 1), (std::vector<int>{0, 1, 3, 5}));
  EXPECT_THROW(run_top_k({1, 2, 3, 4}, 1, 1, 1), std::invalid_argument);
}

TEST(TopKRef, NegativeScoresOrderCorrectly) {
  EXPECT_EQ(run_top_k({-0.5f, -2.0f, -0.1f, -3.0f}, 2, 0, 0), (std::vector<int>{0, 2}));
}

TEST(TopKRef, EachHeadSelectsIndependently) {
  HostTensor s(DType::kF32, {2, 4}), idx(DType::kI32, {2, 2});
  const float v[] = {1, 2, 3, 4, 4, 3, 2, 1};
  for (int i = 0; i < 8; ++i) s.set(i, v[i]);
  cpu::top_k({s.view(), idx.view(), 0, 0});
  EXPECT_EQ(idx.geti(0), 2);
  EXPECT_EQ(idx.geti(1), 3);
  EXPECT_EQ(idx.geti(2), 0);
  EXPECT_EQ(idx.geti(3), 1);
}

TEST(GatherRef, CompactsEachHeadByItsOwnIndices) {
  // src [4 tokens, 2 heads, 2 dims], value = 100 * token + 10 * head + dim
  HostTensor src(DType::kF32, {4, 2, 2}), idx(DType::kI32, {2, 2}), dst(DType::kF32, {2, 2, 2});
  for (int t = 0; t < 4; ++t)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) src.set((t * 2 + h) * 2 + e, 100.0f * t + 10.0f * h + e);
  idx.seti(0, 1);
  idx.seti(1, 3);  // head 0 keeps tokens 1, 3
  idx.seti(2, 0);
  idx.seti(3, 2);  // head 1 keeps tokens 0, 2
  cpu::kv_gather({src.view(), idx.view(), dst.view()});
  const float want[] = {100, 101, 10, 11, 300, 301, 210, 211};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst.get(i), want[i]) << i;
}

}  // namespace
}  // namespace kvshift::kernels
