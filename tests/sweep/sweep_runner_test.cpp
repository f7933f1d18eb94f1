// The threaded sweep runner: identical sweep.csv at any --jobs, per-point
// seeds, resume after a partial run, a stop request that keeps finished
// points, bad points rejected before anything is simulated.
#include "sweep/sweep_runner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "cost_model/input_error.hpp"
#include "sweep/point_seed.hpp"
#include "sweep/sweep_table.hpp"
#include "tests/sweep/sweep_test_util.hpp"

namespace kvshift::sweep {
namespace {

using testing::read_file;
using testing::scratch;

SweepPlan small_plan() {
  return make_plan(testing::tiny_scenario(), {"/cluster/star/bandwidth=1Gbps,25Gbps",
                                              "/policies/strategies=[\"full_kv\"],[\"risk_kv\"]"});
}

TEST(SweepRunner, JobsOneAndTwoWriteTheSameTable) {
  // Two strategies per point would double the cost; one strategy per point, swept.
  const SweepPlan plan = make_plan(testing::tiny_scenario(),
                                   {"/cluster/star/bandwidth=1Gbps,25Gbps", "/workload/rate=2,3"});
  SweepPlan one = plan;
  one.base["policies"]["strategies"] = {"full_kv", "risk_kv"};
  const auto a = scratch("jobs1"), b = scratch("jobs2");
  RunnerOptions o;
  o.jobs = 1;
  const SweepOutcome ra = run_sweep(one, a, roofline_costs, o);
  o.jobs = 2;
  const SweepOutcome rb = run_sweep(one, b, roofline_costs, o);
  EXPECT_EQ(ra.points, 4u);
  EXPECT_EQ(ra.simulated, 4u);
  EXPECT_EQ(rb.simulated, 4u);
  EXPECT_EQ(ra.strategies, (std::vector<std::string>{"full_kv", "risk_kv"}));
  const std::string csv = read_file(a / "sweep.csv");
  EXPECT_EQ(csv, read_file(b / "sweep.csv"));
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(read_file(point_summary_path(a, k)), read_file(point_summary_path(b, k)));
  }
  // One header + 4 rows; each row starts with its point number and the scenario's seed:
  // every point sees the same workload (common random numbers).
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_NE(csv.find("\n3,7,25Gbps,3,"), std::string::npos) << csv;
  EXPECT_EQ(csv.substr(0, csv.find('\n')), sweep_header(one.axes, {"full_kv", "risk_kv"}));
}

TEST(SweepRunner, SeveralDeploymentsGetColumnsOfTheirOwn) {
  const SweepPlan plan =
      make_plan(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/multi-model.json",
                {"/cluster/star/bandwidth=25Gbps,100Gbps", "/policies/strategies=[\"adaptive\"]"});
  const auto dir = scratch("deployments");
  RunnerOptions o;
  o.jobs = 2;
  run_sweep(plan, dir, roofline_costs, o);
  const std::string csv = read_file(dir / "sweep.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(header, sweep_header(plan.axes, {"adaptive"}, {"chat", "code"}));
  for (const char* column : {"adaptive.chat.recovery_p99_s", "adaptive.code.completed"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column;
  }
  // Each row's deployments add up to its strategy's completed requests.
  std::vector<std::string> names;
  std::stringstream h(header);
  for (std::string cell; std::getline(h, cell, ',');) names.push_back(cell);
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  std::stringstream rows(csv.substr(csv.find('\n') + 1));
  int checked = 0;
  for (std::string line; std::getline(rows, line);) {
    std::vector<std::string> cells;
    std::stringstream c(line);
    for (std::string cell; std::getline(c, cell, ',');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), names.size());
    EXPECT_EQ(std::stoll(cells[col("adaptive.chat.completed")]) +
                  std::stoll(cells[col("adaptive.code.completed")]),
              std::stoll(cells[col("adaptive.completed")]));
    EXPECT_FALSE(cells[col("adaptive.code.recovery_p99_s")].empty());
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(SweepRunner, ResumeSkipsFinishedPointsAndGivesTheSameTable) {
  const SweepPlan plan = small_plan();
  const auto dir = scratch("resume");
  RunnerOptions o;
  o.jobs = 2;
  run_sweep(plan, dir, roofline_costs, o);
  const std::string full = read_file(dir / "sweep.csv");
  std::filesystem::remove(point_summary_path(dir, 2));
  std::filesystem::remove(dir / "sweep.csv");
  o.resume = true;
  const SweepOutcome r = run_sweep(plan, dir, roofline_costs, o);
  EXPECT_EQ(r.skipped, 3u);
  EXPECT_EQ(r.simulated, 1u);
  EXPECT_EQ(read_file(dir / "sweep.csv"), full);
  // The saved plan reloads to the same axes.
  const SweepPlan saved =
      plan_from_json(nlohmann::json::parse(read_file(dir / "sweep.json")), "sweep.json");
  EXPECT_EQ(saved.sets, plan.sets);
  EXPECT_EQ(saved.base, plan.base);
}

TEST(SweepRunner, AStopRequestKeepsFinishedPointsAndWritesNoTable) {
  const auto dir = scratch("stop");
  std::atomic<bool> stop{true};
  RunnerOptions o;
  o.stop = &stop;
  const SweepOutcome r = run_sweep(small_plan(), dir, roofline_costs, o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.simulated, 0u);
  EXPECT_EQ(r.missing, 4u);
  EXPECT_FALSE(std::filesystem::exists(dir / "sweep.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "sweep.json"));
}

TEST(SweepRunner, AValueThatFailsTheSchemaStopsBeforeSimulating) {
  const SweepPlan plan =
      make_plan(testing::tiny_scenario(), {"/cluster/star/bandwidth=1Gbps,fast"});
  const auto dir = scratch("bad");
  try {
    run_sweep(plan, dir, roofline_costs, {});
    FAIL() << "no throw";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("point 1 (/cluster/star/bandwidth=fast)"), std::string::npos) << m;
    EXPECT_NE(m.find("/cluster/star/bandwidth"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(point_summary_path(dir, 0)));
}

TEST(SweepRunner, ASetThatMatchesNothingIsRejectedByThePlan) {
  EXPECT_THROW(make_plan(testing::tiny_scenario(), {"/cluster/links/*/bandwidth=1Gbps"}),
               InputError);
}

}  // namespace
}  // namespace kvshift::sweep
