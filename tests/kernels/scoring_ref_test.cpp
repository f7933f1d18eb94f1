// CPU twins of the pruning score ops on cases computed by hand: the largest
// attention weight per key (KVZip) and the mass it sums to, the GQA group
// reduction, SnapKV's pooling with its zero-padded ends, and log_mean_attention.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "kernels/cpu.hpp"
#include "ref_support.hpp"

namespace kvshift::kernels {
namespace {

using testing::expect_values;
using testing::filled;
using testing::HostTensor;

// Two queries at positions 1 and 2 over three keys, head_dim 1, scale 1: k = (0, ln3, ln2),
// q = (1, 1). Query 0 sees keys 0, 1 with weights (1/4, 3/4); query 1 sees all three with
// weights (1/6, 1/2, 1/3); the log-sum-exps are ln4 and ln6.
struct TwoQueries {
  HostTensor q = filled({2, 1, 1}, {1, 1});
  HostTensor k = filled({3, 1, 1}, {0, std::log(3.0f), std::log(2.0f)});
  HostTensor lse = filled({2, 1}, {std::log(4.0f), std::log(6.0f)});
  HostTensor out{DType::kF32, {1, 3}};
  void run(Reduce reduce, std::int64_t begin) {
    cpu::attention_mass({q.view(), k.view(), lse.view(), out.view(), 1, begin, reduce});
  }
};

TEST(AttentionMaxRef, TakesTheLargestWeightAnyQueryGivesEachKey) {
  TwoQueries c;
  c.run(Reduce::kMax, 0);
  expect_values(c.out, {1.0 / 4, 3.0 / 4, 1.0 / 3});
}

TEST(AttentionMaxRef, OnlyQueriesFromQueryBeginVote) {
  TwoQueries c;
  c.run(Reduce::kMax, 1);
  expect_values(c.out, {1.0 / 6, 1.0 / 2, 1.0 / 3});
  c.run(Reduce::kMax, 2);  // nobody votes: every key gets 0
  expect_values(c.out, {0, 0, 0});
}

TEST(AttentionMaxRef, SumOfTheSameWeightsIsTheMass) {
  TwoQueries c;
  c.run(Reduce::kSum, 0);
  expect_values(c.out, {1.0 / 4 + 1.0 / 6, 3.0 / 4 + 1.0 / 2, 1.0 / 3});
}

// Four query heads, two KV heads: rows 0, 1 form KV head 0 and rows 2, 3 KV head 1.
TEST(GroupReduceRef, SumsOrMaxesConsecutiveQueryHeads) {
  const HostTensor in = filled({4, 2}, {1, 5, 3, 2, -1, 0, 4, -2});
  HostTensor out(DType::kF32, {2, 2});
  cpu::group_reduce({in.view(), out.view(), Reduce::kSum});
  expect_values(out, {4, 7, 3, -2});
  cpu::group_reduce({in.view(), out.view(), Reduce::kMax});
  expect_values(out, {3, 5, 4, 0});
}

TEST(GroupReduceRef, TwoLayersReduceSeparately) {
  // layers 2 x q_heads 2 -> layers 2 x kv_heads 1
  const HostTensor in = filled({4, 1}, {1, 2, 10, 20});
  HostTensor out(DType::kF32, {2, 1});
  cpu::group_reduce({in.view(), out.view(), Reduce::kSum});
  expect_values(out, {3, 30});
}

TEST(GroupReduceRef, RejectsRowsThatAreNotGroups) {
  const HostTensor in = filled({3, 1}, {1, 2, 3});
  HostTensor out(DType::kF32, {2, 1});
  EXPECT_THROW(cpu::group_reduce({in.view(), out.view()}), std::invalid_argument);
}

TEST(AvgPoolRef, EndsArePaddedWithZerosAndDividedByTheKernel) {
  const HostTensor in = filled({2, 4}, {1, 2, 3, 4, 1, 1, 1, 1});
  HostTensor out(DType::kF32, {2, 4});
  cpu::avg_pool({in.view(), out.view(), 3});
  expect_values(out, {1, 2, 3, 7.0 / 3, 2.0 / 3, 1, 1, 2.0 / 3});
  cpu::avg_pool({in.view(), out.view(), 5});
  expect_values(out, {6.0 / 5, 2, 2, 9.0 / 5, 3.0 / 5, 4.0 / 5, 4.0 / 5, 3.0 / 5});
  cpu::avg_pool({in.view(), out.view(), 1});
  expect_values(out, {1, 2, 3, 4, 1, 1, 1, 1});
  EXPECT_THROW(cpu::avg_pool({in.view(), out.view(), 4}), std::invalid_argument);
}

TEST(LogMeanAttentionRef, DividesByTheQueriesThatSeeEachKey) {
  // T = 3: key 0 is seen by 3 queries, key 1 by 2, key 2 by 1.
  const HostTensor mass = filled({2, 3}, {3, 1, 0.5f, 0, 0, 2});
  HostTensor out(DType::kF32, {2, 3});
  cpu::log_mean_attention({mass.view(), out.view()});
  expect_values(out, {std::log(1.0 + 1e-6), std::log(0.5 + 1e-6), std::log(0.5 + 1e-6),
                      std::log(1e-6), std::log(1e-6), std::log(2.0 + 1e-6)});
}

}  // namespace
}  // namespace kvshift::kernels
