// Objectives for kvshift search: parsing, units, unknown metrics, evaluation.
#include "sweep/objective.hpp"

#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"

namespace kvshift::sweep {
namespace {

using nlohmann::json;

TEST(Objective, ParsesADurationBoundIntoSeconds) {
  const Objective o = parse_objective("recovery.p99<=2s");
  ASSERT_EQ(o.clauses.size(), 1u);
  EXPECT_EQ(o.clauses[0].pointer, "/recovery/p99_s");
  EXPECT_EQ(o.clauses[0].op, Comparison::kLessEqual);
  EXPECT_DOUBLE_EQ(o.clauses[0].bound, 2.0);
}

TEST(Objective, JoinsClausesAndReadsEveryOperator) {
  const Objective o = parse_objective(
      "ttft.p50_s < 500ms && requests.failed<=0 && goodput_tokens_per_s>=10 "
      "&& bytes.kv > 1GiB");
  ASSERT_EQ(o.clauses.size(), 4u);
  EXPECT_EQ(o.clauses[0].pointer, "/ttft/p50_s");
  EXPECT_DOUBLE_EQ(o.clauses[0].bound, 0.5);
  EXPECT_EQ(o.clauses[0].op, Comparison::kLess);
  EXPECT_EQ(o.clauses[1].pointer, "/requests/failed");
  EXPECT_EQ(o.clauses[2].op, Comparison::kGreaterEqual);
  EXPECT_EQ(o.clauses[3].op, Comparison::kGreater);
  EXPECT_DOUBLE_EQ(o.clauses[3].bound, 1073741824.0);
}

TEST(Objective, MalformedObjectivesAreInputErrorsNamingTheFlag) {
  for (const char* bad :
       {"recovery.p99", "recovery.p99<=", "<=2s", "recovery.p99<=2 parsecs", "recovry.p99<=2s",
        "recovery.p42<=2s", "recovery.p99<=2s &&", "a<=b<=c"}) {
    try {
      parse_objective(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--objective: ", 0), 0u) << e.what();
    }
  }
}

TEST(Objective, EvaluatesAgainstAStrategySummary) {
  const json s = json::parse(R"({"recovery":{"count":3,"p99_s":1.5},"requests":{"failed":2}})");
  const auto r =
      evaluate(parse_objective("recovery.p99<=2s && requests.failed<2 && migration.p99<=1s"), s);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].met);
  EXPECT_DOUBLE_EQ(*r[0].value, 1.5);
  EXPECT_FALSE(r[1].met);
  EXPECT_FALSE(r[2].value.has_value());  // no migrations: no p99, not met
  EXPECT_FALSE(r[2].met);
}

}  // namespace
}  // namespace kvshift::sweep
