// TableCosts: log-log interpolation of measured costs in T and N.
#include <gtest/gtest.h>

#include <cmath>

#include "cost_model/input_error.hpp"
#include "cost_model/table_costs.hpp"

namespace kvshift::cost_model {
namespace {

CostTableEntry row(const char* op, std::int64_t t, std::int64_t n, double s) {
  return {op, t, n, s, s * 0.9, s * 1.1, 5};
}

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
  const TableCosts c("m", 4, {row("prefill", 128, 1, 0.01), row("prefill", 512, 1, 0.04)});
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
  const TableCosts c("m", 4, rows);
  const ModelSpec m = model_named("m");
  const Topology four = Topology::from_groups(24, {2, 3, 4, 5});
  const Topology two = Topology::from_groups(24, {2, 5});
  EXPECT_NEAR(c.reconstruct(m, four, 1024, 8, DType::kF32).value, 1e-6 * 1024 * std::sqrt(8.0),
              1e-15);
  EXPECT_NEAR(c.reconstruct(m, two, 1024, 8, DType::kF32).value, 0.5 * 1e-6 * 1024 * std::sqrt(8.0),
              1e-15);
  EXPECT_EQ(c.reconstruct(m, Topology{}, 1024, 8, DType::kF32).value, 0.0);
}

TEST(TableCosts, RejectsAnotherModelAndMissingOps) {
  const TableCosts c("qwen2.5-0.5b", 1, {row("prefill", 128, 1, 0.01)});
  EXPECT_THROW(c.prefill(model_named("tinyllama-1.1b"), 128), InputError);
  EXPECT_THROW(c.interpolate("prune", 128), InputError);
  EXPECT_THROW(c.decode_step(model_named("qwen2.5-0.5b"), 1, 128), InputError);
  EXPECT_FALSE(c.has("reconstruct"));
}

TEST(TableCosts, DecodeStepsComeFromTheFallback) {
  const RooflineCosts roofline(find_gpu("h200"));
  const TableCosts c("qwen2.5-0.5b", 1, {row("prefill", 128, 1, 0.01)}, &roofline);
  const ModelSpec m = find_model("qwen2.5-0.5b");
  EXPECT_EQ(c.decode_step(m, 4, 2048).value, roofline.decode_step(m, 4, 2048).value);
}

}  // namespace
}  // namespace kvshift::cost_model
