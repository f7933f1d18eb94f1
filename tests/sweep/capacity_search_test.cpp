// Capacity search: knobs, and a bisection whose answer meets the objective
// while the value just below it does not.
#include "sweep/capacity_search.hpp"

#include <gtest/gtest.h>

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
  ASSERT_TRUE(r.below.has_value());
  EXPECT_LT(*r.below, *r.answer);
  EXPECT_LE(*r.answer / *r.below, 1.25 + 1e-9);
  for (const Probe& p : r.probes) {
    ASSERT_TRUE(p.results[0].value.has_value());
    EXPECT_EQ(p.met, *p.results[0].value <= 0.1);
    EXPECT_EQ(p.met, p.value >= *r.answer);  // monotone: met exactly at and above the answer
  }
  EXPECT_LE(r.probes.size(), 14u);
}

TEST(CapacitySearch, ReportsNoAnswerWhenEvenHiFails) {
  SweepPlan plan = make_plan(testing::tiny_scenario(), {});
  SearchSettings s;
  s.knob = parse_knob("/cluster/star/bandwidth=1Gbps..2Gbps");
  s.objective = parse_objective("recovery.p99<=1ms");
  s.strategy = "risk_kv";
  const SearchResult r = capacity_search(plan, s, roofline_costs);
  EXPECT_FALSE(r.answer.has_value());
  EXPECT_EQ(r.probes.size(), 1u);
}

}  // namespace
}  // namespace kvshift::sweep
