// TableCosts: log-log interpolation of measured costs in T and N.
#include <gtest/gtest.h>

#include <cmath>

#include "cost_model/input_error.hpp"
#include "cost_model/table_costs.hpp"

namespace kvshift::cost_model {
namespace {

CostTableEntry row(const char* op, std::int64_t t, std::int64_t n, double s) {
  return {.op = op,
          .tokens = t,
          .sharing = n,
          .median_s = s,
          .p10_s = s * 0.9,
          .p90_s = s * 1.1,
          .repeats = 5};
}

CostTableEntry decode_row(std::int64_t context, std::int64_t batch, double s) {
  CostTableEntry e = row("decode", context, 1, s);
  e.batch = batch;
  return e;
}

TableInfo info(const char* model, int groups) { return {model, groups, {}, {}, "t.json (cpu)"}; }

ModelSpec model_named(const char* name) {
  ModelSpec m = find_model("qwen2.5-0.5b");
  m.name = name;
  return m;
}

TEST(InterpolateLogLog, IsExactOnPowerLawsAndAtMeasuredPoints) {
  // y = 2·x^1.5 measured at 100, 400, 1600
  const std::vector<std::pair<double, double>> p = {{100, 2 * std::pow(100, 1.5)},
                                                    {400, 2 * std::pow(400, 1.5)},
                                                    {1600, 2 * std::pow(1600, 1.5)}};
  for (double x : {100.0, 200.0, 400.0, 1000.0, 1600.0, 50.0, 6400.0}) {
    EXPECT_NEAR(interpolate_log_log(p, x) / (2 * std::pow(x, 1.5)), 1.0, 1e-12) << x;
  }
}

TEST(InterpolateLogLog, UsesEachSegmentsOwnSlopeAndScalesASinglePointProportionally) {
  const std::vector<std::pair<double, double>> p = {{1, 1}, {10, 10}, {100, 1000}};
  EXPECT_NEAR(interpolate_log_log(p, std::sqrt(10.0)), std::sqrt(10.0), 1e-12);  // slope 1
  EXPECT_NEAR(interpolate_log_log(p, std::sqrt(1000.0)), 100.0, 1e-9);           // slope 2
  EXPECT_NEAR(interpolate_log_log({{512, 0.04}}, 1024), 0.08, 1e-15);
}

TEST(TableCosts, PrefillInterpolatesInTokens) {
  const TableCosts c(info("m", 4), {row("prefill", 128, 1, 0.01), row("prefill", 512, 1, 0.04)});
  EXPECT_NEAR(c.prefill(model_named("m"), 256).value, 0.02, 1e-12);
  EXPECT_NEAR(c.prefill(model_named("M"), 512).value, 0.04, 1e-15);
}

TEST(TableCosts, ReconstructInterpolatesInTokensThenSharingAndScalesByGroups) {
  // t(T, N) = 1e-6 · T · N^0.5 measured on a grid; 4 groups measured.
  std::vector<CostTableEntry> rows;
  for (std::int64_t t : {128, 512, 2048}) {
    for (std::int64_t n : {1, 4, 16})
      rows.push_back(row("reconstruct", t, n, 1e-6 * t * std::sqrt(n)));
  }
  const TableCosts c(info("m", 4), rows);
  const ModelSpec m = model_named("m");
  const OmissionPlan four = OmissionPlan::from_groups(24, {2, 3, 4, 5});
  const OmissionPlan two = OmissionPlan::from_groups(24, {2, 5});
  EXPECT_NEAR(c.reconstruct(m, four, 1024, 8, DType::kF32).value, 1e-6 * 1024 * std::sqrt(8.0),
              1e-15);
  EXPECT_NEAR(c.reconstruct(m, two, 1024, 8, DType::kF32).value, 0.5 * 1e-6 * 1024 * std::sqrt(8.0),
              1e-15);
  EXPECT_EQ(c.reconstruct(m, OmissionPlan{}, 1024, 8, DType::kF32).value, 0.0);
}

TEST(TableCosts, RejectsAnotherModelAndMissingOps) {
  const TableCosts c(info("qwen2.5-0.5b", 1), {row("prefill", 128, 1, 0.01)});
  EXPECT_THROW(c.prefill(model_named("tinyllama-1.1b"), 128), InputError);
  EXPECT_THROW(c.interpolate("prune", 128), InputError);
  EXPECT_THROW(c.decode_step(model_named("qwen2.5-0.5b"), 1, 128), InputError);
  EXPECT_FALSE(c.has("reconstruct"));
}

TEST(TableCosts, OpsTheTableLacksComeFromTheFallbackAndSourcesSaySo) {
  const RooflineCosts roofline(find_gpu("h200"));
  const TableCosts c(info("qwen2.5-0.5b", 1), {row("prefill", 128, 1, 0.01)}, &roofline);
  const ModelSpec m = find_model("qwen2.5-0.5b");
  EXPECT_EQ(c.decode_step(m, 4, 2048).value, roofline.decode_step(m, 4, 2048).value);
  EXPECT_EQ(c.prune(m, 512, 0.3).value, roofline.prune(m, 512, 0.3).value);
  const auto sources = c.sources();
  ASSERT_EQ(sources.size(), compute_ops().size());
  EXPECT_EQ(sources[0].source, "table t.json (cpu)");
  EXPECT_NEAR(sources[0].spread, 0.2, 1e-12);  // (1.1 - 0.9) / 1
  EXPECT_EQ(sources[1].op, "decode");
  EXPECT_EQ(sources[1].source, "analytic (roofline of h200) (the table has no decode rows)");
}

TEST(TableCosts, DecodeInterpolatesInContextPerRequestThenBatch) {
  // time = 1e-3 · B^0.5 · (C/1024): exact for log-log in both axes.
  auto t = [](double c, double b) { return 1e-3 * std::sqrt(b) * c / 1024; };
  std::vector<CostTableEntry> rows;
  for (std::int64_t b : {1, 4, 16}) {
    for (std::int64_t c : {256, 1024, 4096}) rows.push_back(decode_row(c, b, t(c, b)));
  }
  const TableCosts c(info("m", 1), rows);
  const ModelSpec m = model_named("m");
  // decode_step takes the batch's total context.
  EXPECT_NEAR(c.decode_step(m, 8, 8 * 2048).value / t(2048, 8), 1.0, 1e-12);
  EXPECT_NEAR(c.decode_step(m, 1, 300).value / t(300, 1), 1.0, 1e-12);
  EXPECT_NEAR(c.decode_step(m, 4, 4 * 1024).value, t(1024, 4), 1e-15);
}

TEST(TableCosts, ProxyScoreChecksTheProxyAndPruneScalesByTheBytesItMoves) {
  TableInfo i = info("m", 1);
  i.proxy = "p";
  i.retention = 0.5;
  const TableCosts c(i, {row("proxy_score", 512, 1, 0.02), row("prune", 512, 1, 0.003)});
  const ModelSpec m = model_named("m");
  EXPECT_DOUBLE_EQ(c.proxy_score(model_named("p"), m, 512).value, 0.02);
  EXPECT_DOUBLE_EQ(c.proxy_score(model_named("p"), m, 1024).value, 0.04);
  EXPECT_THROW(c.proxy_score(model_named("q"), m, 512), InputError);
  EXPECT_DOUBLE_EQ(c.prune(m, 512, 0.5).value, 0.003);
  EXPECT_DOUBLE_EQ(c.prune(m, 512, 0.2).value, 0.003 * 1.2 / 1.5);
}

}  // namespace
}  // namespace kvshift::cost_model
