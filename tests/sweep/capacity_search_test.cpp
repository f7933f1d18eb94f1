// Capacity search: knobs; a bisection whose answer meets the objective while the
// probed value next to it does not; both ends checked (a knob where smaller is
// better, --want most); a non-monotone objective searched on a grid; and each
// probe's move counters read from the run.
#include "sweep/capacity_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "cost_model/input_error.hpp"
#include "tests/sweep/sweep_test_util.hpp"

namespace kvshift::sweep {
namespace {

TEST(CapacitySearch, KnobKindsComeFromTheUnits) {
  const Knob b = parse_knob("/cluster/star/bandwidth=1Mbps..100Gbps");
  EXPECT_EQ(b.kind, KnobKind::kBandwidth);
  EXPECT_DOUBLE_EQ(b.lo, 1e6);
  EXPECT_DOUBLE_EQ(b.hi, 1e11);
  EXPECT_EQ(knob_value_text(b, 1.5e9), "1500000000bps");
  const Knob n = parse_knob("/workload/rate=1..16");
  EXPECT_EQ(n.kind, KnobKind::kNumber);
  EXPECT_TRUE(n.integer);
  EXPECT_EQ(parse_knob("/x=10ms..2s").kind, KnobKind::kDuration);
  EXPECT_EQ(knob_value_text(parse_knob("/x=10ms..2s"), 0.25), "250000000ns");
  EXPECT_THROW(parse_knob("/x=2s..10ms"), InputError);
  EXPECT_THROW(parse_knob("/x=1Gbps..2s"), InputError);
  EXPECT_THROW(parse_knob("/x=1Gbps"), InputError);
  EXPECT_THROW(parse_knob("/x=fast..faster"), InputError);
}

TEST(CapacitySearch, FindsTheLeastBandwidthMeetingARecoverySlo) {
  SweepPlan plan = make_plan(testing::tiny_scenario(), {});
  SearchSettings s;
  s.knob = parse_knob("/cluster/star/bandwidth=1Gbps..100Gbps");
  s.objective = parse_objective("recovery.p99<=100ms");
  s.strategy = "risk_kv";
  s.tolerance = 0.25;
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  ASSERT_TRUE(r.answer.has_value());
  ASSERT_TRUE(r.nearest_unmet.has_value());
  EXPECT_TRUE(r.monotone);
  EXPECT_LT(*r.nearest_unmet, *r.answer);
  EXPECT_LE(*r.answer / *r.nearest_unmet, 1.25 + 1e-9);
  for (const Probe& p : r.probes) {
    ASSERT_TRUE(p.results[0].value.has_value());
    EXPECT_EQ(p.met, *p.results[0].value <= 0.1);
    EXPECT_EQ(p.met, p.value >= *r.answer);  // monotone: met exactly at and above the answer
  }
  EXPECT_LE(r.probes.size(), 14u);
}

TEST(CapacitySearch, ReportsNoAnswerWhenNoProbedValueMeetsIt) {
  SweepPlan plan = make_plan(testing::tiny_scenario(), {});
  SearchSettings s;
  s.knob = parse_knob("/cluster/star/bandwidth=1Gbps..2Gbps");
  s.objective = parse_objective("recovery.p99<=1ms");
  s.strategy = "risk_kv";
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  EXPECT_FALSE(r.answer.has_value());
  EXPECT_EQ(r.probes.size(), 5u);  // both ends and the three quarter points
  EXPECT_TRUE(r.met_stretches.empty());
}

std::string search_base() {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep/data/search_base.json";
}

// Larger latency is worse: the least latency that meets the SLO is LO itself, which the
// search used to miss by giving up when HI failed.
TEST(CapacitySearch, ChecksBothEndsOfTheRange) {
  SweepPlan plan = make_plan(search_base(), {});
  SearchSettings s;
  s.knob = parse_knob("/cluster/star/latency=1us..100ms");
  s.objective = parse_objective("recovery.p99<=200ms");
  s.strategy = "full_kv";
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  ASSERT_TRUE(r.answer.has_value());
  EXPECT_DOUBLE_EQ(*r.answer, 1e-6);
  ASSERT_EQ(r.probes.size(), 2u);
  EXPECT_FALSE(probe_at(r, 0.1)->met);
  EXPECT_TRUE(probe_at(r, 1e-6)->met);
}

// A planner asks for the most traffic that still meets the SLO: the largest rate, with the
// next rate up failing it, and every probe consistent with one threshold.
TEST(CapacitySearch, WantMostFindsTheLargestValueThatMeetsIt) {
  SweepPlan plan = make_plan(search_base(), {});
  SearchSettings s;
  s.knob = parse_knob("/workload/rate=1..400");
  s.objective = parse_objective("ttft.p99<=100ms");
  s.strategy = "full_kv";
  s.want = Want::kMost;
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  ASSERT_TRUE(r.answer.has_value());
  ASSERT_TRUE(r.nearest_unmet.has_value());
  EXPECT_TRUE(r.monotone);
  EXPECT_GT(*r.answer, 100);
  EXPECT_LT(*r.answer, 400);
  EXPECT_EQ(*r.nearest_unmet, *r.answer + 1);  // integers: the bracket closes to one step
  for (const Probe& p : r.probes) EXPECT_EQ(p.met, p.value <= *r.answer) << p.value;
  // The same search for the least rate answers LO, which meets it.
  s.want = Want::kLeast;
  EXPECT_EQ(capacity_search(plan, s, roofline_costs).answer, 1.0);
}

// More requests complete at a higher rate, and TTFT grows with it: the objective holds only
// inside a window, so neither end meets it. Bisection cannot handle that; the grid finds it.
TEST(CapacitySearch, ANonMonotoneObjectiveIsSearchedOnAGrid) {
  SweepPlan plan = make_plan(search_base(), {});
  SearchSettings s;
  s.knob = parse_knob("/workload/rate=1..400");
  s.objective = parse_objective("ttft.p99<=100ms && requests.completed>=150");
  s.strategy = "full_kv";
  s.max_probes = 13;  // 13 grid values: LO, HI and 11 between
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  EXPECT_FALSE(r.monotone);
  EXPECT_FALSE(probe_at(r, 1)->met);
  EXPECT_FALSE(probe_at(r, 400)->met);
  ASSERT_TRUE(r.answer.has_value());
  ASSERT_EQ(r.met_stretches.size(), 1u);
  EXPECT_EQ(*r.answer, r.met_stretches[0].from);
  ASSERT_TRUE(r.nearest_unmet.has_value());
  EXPECT_FALSE(probe_at(r, *r.nearest_unmet)->met);
  EXPECT_LT(*r.nearest_unmet, *r.answer);
  EXPECT_LE(r.probes.size(), 13u);
  EXPECT_TRUE(std::any_of(r.probes.begin(), r.probes.end(), [](const Probe& p) { return p.grid; }));
  // Asked for the most, the same grid answers the top of the window.
  s.want = Want::kMost;
  const SearchResult most = capacity_search(plan, s, roofline_costs);
  ASSERT_TRUE(most.answer.has_value());
  EXPECT_EQ(*most.answer, most.met_stretches.back().to);
}

// A probe reports what the strategy's moves did, as the run's own counters say: at 1 Gbps every
// full_kv recovery falls back, and a sweep point at the same value counts the same.
TEST(CapacitySearch, ProbesCarryTheRunsFallbackCounters) {
  SweepPlan plan = make_plan(search_base(), {});
  SearchSettings s;
  s.knob = parse_knob("/cluster/star/bandwidth=1Gbps..100Gbps");
  s.objective = parse_objective("recovery.p99<=100ms");
  s.strategy = "full_kv";
  s.max_probes = 2;
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  const Probe* slow = probe_at(r, 1e9);
  ASSERT_NE(slow, nullptr);
  EXPECT_GT(slow->moves.fallbacks, 0);
  EXPECT_EQ(slow->moves.executed.count("full_kv"), 0u);  // none ran as full_kv
  // At 100 Gbps the replicas keep up: a recovery falls back only because its replica lags by
  // the tokens decoded since its last flush, to prefix_recompute (ships it, recomputes those).
  const Probe* fast = probe_at(r, 1e11);
  for (const auto& [strategy, n] : fast->moves.executed) {
    EXPECT_TRUE(strategy == "full_kv" || strategy == "prefix_recompute") << strategy;
  }
  const auto recomputed = fast->moves.executed.find("prefix_recompute");
  EXPECT_EQ(fast->moves.fallbacks,
            recomputed == fast->moves.executed.end() ? 0 : recomputed->second);

  SweepPlan point = make_plan(
      search_base(), {"/cluster/star/bandwidth=1Gbps", "/policies/strategies=[\"full_kv\"]"});
  const nlohmann::json summary = simulate_point(load_point(point, 0), roofline_costs);
  const nlohmann::json& moves = summary.at("strategies").at("full_kv").at("moves");
  EXPECT_EQ(slow->moves.fallbacks, moves.at("fallbacks").get<std::int64_t>());
  EXPECT_EQ(slow->moves.unfinished, moves.at("unfinished").get<std::int64_t>());
}

TEST(CapacitySearch, WantIsLeastOrMost) {
  EXPECT_EQ(parse_want("least"), Want::kLeast);
  EXPECT_EQ(parse_want("most"), Want::kMost);
  EXPECT_THROW(parse_want("max"), InputError);
}

}  // namespace
}  // namespace kvshift::sweep
