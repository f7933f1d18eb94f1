// Cost table files: strict reading with JSON-pointer diagnostics, and the
// writer/reader round trip.
#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "input/cost_table.hpp"

namespace kvshift::input {
namespace {

Json valid_table() {
  return Json::parse(R"({
    "backend": "cpu", "model": "qwen2.5-0.5b", "topology": "G2,G3,G4,G5", "retention": 0.3,
    "machine": {"cpu": "AMD EPYC", "gpu": "none", "versions": {"eigen": "3.4.0"},
                "date": "2026-11-30T10:00:00Z"},
    "entries": [
      {"op": "prefill", "tokens": 128, "sharing": 1, "median_s": 0.01, "p10_s": 0.009,
       "p90_s": 0.012, "repeats": 5},
      {"op": "prefill", "tokens": 512, "sharing": 1, "median_s": 0.04, "p10_s": 0.039,
       "p90_s": 0.041, "repeats": 5},
      {"op": "reconstruct", "tokens": 512, "sharing": 4, "median_s": 0.002, "p10_s": 0.002,
       "p90_s": 0.003, "repeats": 5}]})");
}

std::string error_of(const Json& j) {
  try {
    parse_cost_table(j, "costs.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CostTable, ParsesAValidTable) {
  const CostTable t = parse_cost_table(valid_table(), "costs.json");
  EXPECT_EQ(t.backend, "cpu");
  EXPECT_EQ(t.model, "qwen2.5-0.5b");
  EXPECT_EQ(t.topology_groups(), 4);
  EXPECT_EQ(t.machine.versions.at("eigen"), "3.4.0");
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.entries[2].op, "reconstruct");
  EXPECT_EQ(t.entries[2].sharing, 4);
  EXPECT_EQ(t.entries[1].median_s, 0.04);
}

TEST(CostTable, WriterAndReaderRoundTrip) {
  const CostTable t = parse_cost_table(valid_table(), "a");
  const CostTable u = parse_cost_table(cost_table_json(t), "b");
  EXPECT_EQ(cost_table_json(t), cost_table_json(u));
  EXPECT_EQ(u.retention, 0.3);
}

TEST(CostTable, ReportsEveryProblemWithItsPointer) {
  Json j = valid_table();
  j["entries"][0]["op"] = "compile";
  j["entries"][1]["tokens"] = 0;
  j["entries"][2]["p10_s"] = 0.5;
  j["machine"]["versions"]["cuda"] = 13;
  j["backnd"] = "x";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("/entries/0/op: must be prefill, decode, reconstruct, proxy_score, prune or "
                   "predictor_load (got \"compile\")"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("/entries/1/tokens: must be a positive integer (got 0)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("/entries/2: needs p10_s <= median_s <= p90_s"), std::string::npos) << e;
  EXPECT_NE(e.find("/machine/versions/cuda: must be a string"), std::string::npos) << e;
  EXPECT_NE(e.find("backnd"), std::string::npos) << e;
}

TEST(CostTable, RejectsDuplicatesMissingFieldsAndEmptyEntries) {
  Json dup = valid_table();
  dup["entries"].push_back(dup["entries"][0]);
  EXPECT_NE(error_of(dup).find("/entries/3: duplicate entry for op prefill, tokens 128"),
            std::string::npos);
  Json missing = valid_table();
  missing["entries"][0].erase("median_s");
  EXPECT_NE(error_of(missing).find("/entries/0"), std::string::npos);
  EXPECT_NE(error_of(missing).find("median_s"), std::string::npos);
  Json empty = valid_table();
  empty["entries"] = Json::array();
  EXPECT_NE(error_of(empty).find("/entries: must hold at least one measurement"),
            std::string::npos);
  EXPECT_NE(error_of(Json::array()).find("must be a JSON object"), std::string::npos);
  Json nan_time = valid_table();
  nan_time["entries"][0]["median_s"] = -1.0;
  EXPECT_NE(error_of(nan_time).find("/entries/0/median_s: must be a number of seconds in (0, 1e6]"),
            std::string::npos);
}

TEST(CostTable, NumbersOutsideDoubleRangeAreAnInputError) {
  // Found by cost_table_fuzz: nlohmann throws out_of_range (not parse_error) for 1e605.
  const std::string text = R"({"backend": "cpu", "entries": [{"median_s": 4.4e605}]})";
  EXPECT_THROW(parse_cost_table_text(text, "costs.json"), InputError);
}

TEST(CostTable, DecodeRowsCarryABatchAndInputsRoundTrip) {
  Json j = valid_table();
  j["entries"].push_back({{"op", "decode"},
                          {"tokens", 1024},
                          {"sharing", 1},
                          {"batch", 8},
                          {"median_s", 0.01},
                          {"p10_s", 0.009},
                          {"p90_s", 0.012},
                          {"repeats", 5}});
  j["inputs"] = {{"weights", "real"},
                 {"model", {{"path", "models/m"}, {"digest", "fnv1a64:0123456789abcdef"}}}};
  const CostTable t = parse_cost_table(j, "a");
  EXPECT_EQ(t.entries.back().batch, 8);
  EXPECT_EQ(t.weights, "real");
  EXPECT_EQ(t.inputs.at("model").digest, "fnv1a64:0123456789abcdef");
  EXPECT_EQ(cost_table_json(parse_cost_table(cost_table_json(t), "b")), cost_table_json(t));
  j["entries"][0]["batch"] = 4;  // a prefill row with a batch
  j["inputs"]["weights"] = "made up";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("/entries/0/batch: applies to decode rows only"), std::string::npos) << e;
  EXPECT_NE(e.find("/inputs/weights: must be \"real\" or \"seeded random\""), std::string::npos)
      << e;
}

TEST(CostTable, FeedsTableCosts) {
  const CostTable t = parse_cost_table(valid_table(), "a");
  const cost_model::TableCosts costs = make_table_costs(t, "a");
  EXPECT_NEAR(costs.prefill(cost_model::find_model("qwen2.5-0.5b"), 256).value, 0.02, 1e-12);
}

}  // namespace
}  // namespace kvshift::input
