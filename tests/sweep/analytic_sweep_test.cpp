// Analytic sweeps: grids, and every cell equal to the cost model's own
// closed forms (cost_model::evaluate), with consistent winner bands.
#include "sweep/analytic_sweep.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "cost_model/cost_record.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/omission_plan.hpp"

namespace kvshift::sweep {
namespace {

std::vector<std::vector<std::string>> rows_of(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    if (!line.empty() && line.back() == ',') f.emplace_back();
    rows.push_back(f);
  }
  return rows;
}

AnalyticSetup setup() {
  AnalyticSetup s;
  s.model = cost_model::find_model("qwen2.5-1.5b");
  s.gpu = cost_model::find_gpu("h100");
  s.latency = Seconds{1e-3};
  return s;
}

TEST(AnalyticGrid, ParsesRangesAndLists) {
  EXPECT_EQ(parse_bandwidth_grid("1Gbps..100Gbps:3", "--bandwidth"),
            (std::vector<double>{1e9, 1e10, 1e11}));
  EXPECT_EQ(parse_bandwidth_grid("10Gbps,1Mbps", "--bandwidth"), (std::vector<double>{1e6, 1e10}));
  EXPECT_EQ(parse_token_grid("100..10000:3", "--tokens"),
            (std::vector<std::int64_t>{100, 1000, 10000}));
  EXPECT_EQ(parse_token_grid("1..2:10", "--tokens"),
            (std::vector<std::int64_t>{1, 2}));  // duplicates dropped
  EXPECT_EQ(parse_int_grid("0..3", "--omit"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(parse_bandwidth_grid("1Gbps..1Mbps:3", "--bandwidth"), InputError);
  EXPECT_THROW(parse_bandwidth_grid("1Gbps..10Gbps:1", "--bandwidth"), InputError);
  EXPECT_THROW(parse_token_grid("0..10:3", "--tokens"), InputError);
  EXPECT_THROW(parse_int_grid("0..3:4", "--omit"), InputError);
}

TEST(AnalyticSweep, EveryPointEqualsTheCostModelsClosedForms) {
  const AnalyticSetup s = setup();
  const AnalyticGrid grid{parse_bandwidth_grid("10Mbps..100Gbps:7", "b"), {256, 4096}, {0, 3}};
  const AnalyticResult r = run_analytic(s, grid, 2, true);
  ASSERT_EQ(r.points, 7u * 2 * 2);
  const auto rows = rows_of(r.points_csv);
  ASSERT_EQ(rows.size(), 28u);
  const cost_model::RooflineCosts compute(s.gpu);
  for (const auto& row : rows) {
    const int k = std::stoi(row[1]);
    std::vector<int> groups;
    for (int g = 2; g < k + 2; ++g) groups.push_back(g);
    const auto topo = cost_model::OmissionPlan::from_groups(s.model.layers, groups);
    cost_model::CostQuery q;
    q.model = &s.model;
    q.omission = &topo;
    q.gpu = &s.gpu;
    q.compute = &compute;
    q.tokens = std::stoll(row[2]);
    q.retention = s.retention;
    q.path = cost_model::Path{BitsPerSecond{std::stod(row[0])}, s.latency};
    const auto rec = cost_model::evaluate(q);
    EXPECT_NEAR(std::stod(row[3]), rec.latency->move.at(cost_model::Strategy::kFullKv).value,
                1e-8 * rec.latency->move.at(cost_model::Strategy::kFullKv).value);
    EXPECT_NEAR(std::stod(row[4]), rec.latency->move.at(cost_model::Strategy::kTokenReplay).value,
                1e-8 * rec.latency->move.at(cost_model::Strategy::kTokenReplay).value);
    EXPECT_NEAR(std::stod(row[5]), rec.latency->move.at(cost_model::Strategy::kRiskKv).value,
                1e-8 * rec.latency->move.at(cost_model::Strategy::kRiskKv).value);
    const double best = std::min({rec.latency->move.at(cost_model::Strategy::kFullKv).value,
                                  rec.latency->move.at(cost_model::Strategy::kTokenReplay).value,
                                  rec.latency->move.at(cost_model::Strategy::kRiskKv).value});
    const std::string& w = row[7];
    const double wt = w == "full_kv" ? rec.latency->move.at(cost_model::Strategy::kFullKv).value
                      : w == "token_replay"
                          ? rec.latency->move.at(cost_model::Strategy::kTokenReplay).value
                          : rec.latency->move.at(cost_model::Strategy::kRiskKv).value;
    EXPECT_EQ(wt, best) << w;
  }
}

TEST(AnalyticSweep, WinnerBandsTileTheBandwidthAxisInOrder) {
  const AnalyticGrid grid{
      parse_bandwidth_grid("1Mbps..1Tbps:200", "b"), {128, 1024, 16384}, {0, 2, 4}};
  const AnalyticResult r = run_analytic(setup(), grid, 1, false);
  EXPECT_TRUE(r.points_csv.empty());
  const auto bands = rows_of(r.winners_csv);
  std::map<std::pair<std::string, std::string>, std::vector<std::vector<std::string>>> by_row;
  for (const auto& b : bands) by_row[{b[0], b[1]}].push_back(b);
  ASSERT_EQ(by_row.size(), 9u);
  for (const auto& [key, bs] : by_row) {
    EXPECT_DOUBLE_EQ(std::stod(bs.front()[2]), 1e6);
    EXPECT_DOUBLE_EQ(std::stod(bs.back()[3]), 1e12);
    for (std::size_t i = 1; i < bs.size(); ++i) {
      EXPECT_LT(std::stod(bs[i - 1][3]), std::stod(bs[i][2]));
      EXPECT_NE(bs[i - 1][4], bs[i][4]);  // adjacent bands differ
    }
    // Slow links favour shipping less (replay or RISK-KV); the fastest favour full KV or RISK-KV.
    EXPECT_NE(bs.front()[4], "full_kv");
  }
  EXPECT_EQ(rows_of(r.crossover_csv).size(), 9u);
}

TEST(AnalyticSweep, RejectsOmittingMoreGroupsThanTheModelHas) {
  const AnalyticGrid grid{{1e9}, {512}, {13}};  // qwen2.5-1.5b: 28 layers, 14 groups -> at most 12
  EXPECT_THROW(run_analytic(setup(), grid, 1, false), InputError);
}

// A 0 bandwidth has no transfer time: the sweep used to write NaN and 0-second rows for it.
TEST(AnalyticGrid, RefusesBandwidthsThatAreNotPositive) {
  for (const char* text : {"0Gbps..1Gbps:5", "0Gbps,1Gbps", "1Gbps,0bps", "1e300Tbps,1Gbps"}) {
    try {
      parse_bandwidth_grid(text, "--bandwidth");
      ADD_FAILURE() << text << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--bandwidth: every bandwidth must be > 0 and finite"),
                std::string::npos)
          << e.what();
    }
  }
}

// Axes are bounded before anything is allocated, and the grid before it is evaluated.
TEST(AnalyticGrid, RefusesAxesTooLargeToHold) {
  EXPECT_THROW(parse_bandwidth_grid("1Mbps..1Gbps:100000000", "--bandwidth"), InputError);
  EXPECT_THROW(parse_token_grid("1..100000:2000000", "--tokens"), InputError);
  EXPECT_THROW(parse_int_grid("0..4000000000", "--omit"), InputError);
  const AnalyticGrid grid{parse_bandwidth_grid("1Mbps..1Gbps:1000000", "--bandwidth"),
                          parse_token_grid("1..100000:1000", "--tokens"),
                          parse_int_grid("0..2", "--omit")};
  try {
    run_analytic(setup(), grid, 1, false);
    ADD_FAILURE() << "a grid of " << grid.tokens.size() << " x 3 x 1e6 points ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--bandwidth/--tokens/--omit: "), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvshift::sweep
