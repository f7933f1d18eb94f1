// risk_kv.quality: a scenario charges RISK-KV the ΔNLL `kvshift quality` measured for its
// topology.json, one file or several run at different histories (each move at its own
// context), and refuses a file of another topology, one that does not say which, a
// topology that is not a file, and a hand-written number beside a measured one.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "cost_model/move_plan.hpp"
#include "tests/input/scenario_test_util.hpp"
#include "tests/testing/file_digest.hpp"

namespace kvshift::input {
namespace {

using testing::json;
using testing::minimal_json;
using testing::problems;
using V = std::vector<std::string>;
namespace fs = std::filesystem;

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() /
         ("kvshift-risk-" + std::to_string(::getpid()) + "-" + name + ".json");
}

/// A calibrated topology.json of qwen2.5-0.5b omitting `group`, with its own test-set mean.
fs::path write_topology(const std::string& name, int group) {
  const fs::path p = temp(name);
  std::ofstream(p) << json{{"omitted_groups", {group}},
                           {"quality", {{"set", "test"}, {"delta_nll_mean", 0.001}}}}
                          .dump();
  return p;
}

/// A quality.json run at `history` tokens whose risk-kv row measured the topology whose digest
/// is `digest` (no "topology" block when empty), beside rows that must not be read.
fs::path write_quality(const std::string& name, std::int64_t history, double delta,
                       const std::string& digest) {
  json risk = {{"method", "risk-kv"},
               {"policy", "risk-kv:t.json"},
               {"retention", nullptr},
               {"delta_nll_mean", delta},
               {"delta_nll_ci95", {delta - 0.001, delta + 0.001}},
               {"over_eps", {{"eps", 0.002}, {"share", 0.25}}}};
  if (!digest.empty()) risk["topology"] = {{"digest", digest}, {"omitted_groups", {3}}};
  const fs::path p = temp(name);
  std::ofstream(p) << json{
      {"format", "kvshift-quality"},
      {"requests", 64},
      {"eval", 256},
      {"history", history},
      {"rows",
       json::array(
           {{{"method", "exact"}, {"delta_nll_mean", 0.0}},
            {{"method", "snapkv"}, {"retention", 0.5}, {"delta_nll_mean", 9.0}},
            risk})}}.dump();
  return p;
}

json with_risk(const json& risk) {
  json j = minimal_json();
  j["policies"] = {{"strategies", {"full_kv", "risk_kv"}}};
  j["risk_kv"] = risk;
  return j;
}

struct Files {
  fs::path topology = write_topology("topology", 3);
  std::string digest = kvshift::testing::fnv1a64_of_file(topology.string());
  fs::path h512 = write_quality("h512", 512, 0.002, digest);
  fs::path h2048 = write_quality("h2048", 2048, 0.008, digest);
  ~Files() {
    for (const auto& p : {topology, h512, h2048}) fs::remove(p);
  }
};

TEST(RiskQuality, OneFileChargesItsMeanWhateverTheContext) {
  const Files f;
  const ScenarioSpec spec =
      testing::load(with_risk({{"topology", f.topology.string()}, {"quality", f.h2048.string()}}));
  ASSERT_TRUE(spec.risk_kv);
  EXPECT_DOUBLE_EQ(spec.risk_kv->delta_nll, 0.008) << "the file's, not the topology's 0.001";
  EXPECT_TRUE(spec.risk_kv->delta_nll_by_context.empty());
  const std::string& source = spec.risk_kv->delta_nll_source;
  EXPECT_NE(
      source.find(f.h2048.string() + " (" + kvshift::testing::fnv1a64_of_file(f.h2048.string()) +
                  "): risk-kv (mean over 64 requests of 256 eval tokens, 95 % CI [0.007, "
                  "0.009]) at 2048 history "
                  "tokens, whatever a move's context"),
      std::string::npos)
      << source;
}

// Each move pays the ΔNLL of its own context, linear between the measured ones and the
// nearest outside them, and the source says so.
TEST(RiskQuality, FilesAtSeveralHistoriesChargeEachMoveAtItsContext) {
  const Files f;
  const ScenarioSpec spec = testing::load(with_risk(
      {{"topology", f.topology.string()}, {"quality", {f.h2048.string(), f.h512.string()}}}));
  ASSERT_TRUE(spec.risk_kv);
  ASSERT_EQ(spec.risk_kv->delta_nll_by_context.size(), 2u);
  EXPECT_DOUBLE_EQ(spec.risk_kv->delta_nll, 0.002) << "the shortest history's";
  EXPECT_NE(spec.risk_kv->delta_nll_source.find("measured at 512, 2048 history tokens; each "
                                                "move is charged at its own context"),
            std::string::npos)
      << spec.risk_kv->delta_nll_source;
  const cost_model::MoveMethods methods =
      sim::move_methods(spec, spec.model, spec.risk_kv, spec.proxy_kv);
  auto charged = [&](std::int64_t context) {
    return cost_model::plan_move(cost_model::Strategy::kRiskKv, methods,
                                 {context, context, cost_model::SourceKv::kFull, true, false})
        .delta_nll;
  };
  EXPECT_DOUBLE_EQ(charged(512), 0.002);
  EXPECT_DOUBLE_EQ(charged(1280), 0.005);
  EXPECT_DOUBLE_EQ(charged(2048), 0.008);
  EXPECT_DOUBLE_EQ(charged(64), 0.002) << "the nearest measured below";
  EXPECT_DOUBLE_EQ(charged(20000), 0.008) << "the nearest measured above";
  // Monotone between two measured points that rise: a longer context never pays less.
  for (std::int64_t c = 512; c < 2048; c += 97) EXPECT_LE(charged(c), charged(c + 97)) << c;
}

TEST(RiskQuality, AFileOfAnotherTopologyIsRefusedNamingBoth) {
  const Files f;
  const fs::path other = write_topology("other", 5);
  const V p = problems(with_risk({{"topology", other.string()}, {"quality", f.h512.string()}}));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("/risk_kv/quality: " + f.h512.string() +
                      ": measured RISK-KV on another topology than risk_kv.topology (" +
                      other.string() + " (" + kvshift::testing::fnv1a64_of_file(other.string()) +
                      ")): risk-kv:t.json (" + f.digest + ")"),
            std::string::npos)
      << p[0];
  fs::remove(other);
}

TEST(RiskQuality, RefusesWhatItCannotCheck) {
  const Files f;
  const fs::path undated = write_quality("undated", 512, 0.002, "");
  const V old_file =
      problems(with_risk({{"topology", f.topology.string()}, {"quality", undated.string()}}));
  ASSERT_EQ(old_file.size(), 1u);
  EXPECT_NE(old_file[0].find("its risk-kv row does not say which topology it measured"),
            std::string::npos)
      << old_file[0];
  const V not_a_file = problems(with_risk({{"topology", "G3"}, {"quality", f.h512.string()}}));
  ASSERT_EQ(not_a_file.size(), 1u);
  EXPECT_NE(not_a_file[0].find("/risk_kv/quality: charges the topology a quality.json measured: "
                               "risk_kv.topology must be that topology.json (got \"G3\")"),
            std::string::npos)
      << not_a_file[0];
  const V both = problems(with_risk(
      {{"topology", f.topology.string()}, {"quality", f.h512.string()}, {"delta_nll", 0.1}}));
  ASSERT_EQ(both.size(), 1u);
  EXPECT_NE(both[0].find("/risk_kv/quality: give either measured quality.json files or a "
                         "hand-written delta_nll, not both"),
            std::string::npos)
      << both[0];
  const V same_history = problems(with_risk(
      {{"topology", f.topology.string()}, {"quality", {f.h512.string(), f.h512.string()}}}));
  ASSERT_EQ(same_history.size(), 1u);
  EXPECT_NE(same_history[0].find("/risk_kv/quality/1: two files measured at 512 history tokens"),
            std::string::npos)
      << same_history[0];
  const fs::path no_risk = temp("no-risk");
  std::ofstream(no_risk) << json{{"format", "kvshift-quality"},
                                 {"history", 512},
                                 {"rows", json::array({{{"method", "exact"}}})}}
                                .dump();
  const V none =
      problems(with_risk({{"topology", f.topology.string()}, {"quality", no_risk.string()}}));
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none[0].find(": holds no risk-kv rows (measure --policy risk-kv:TOPOLOGY.json)"),
            std::string::npos)
      << none[0];
  for (const auto& p : {undated, no_risk}) fs::remove(p);
}

// A quality budget refuses RISK-KV only when no measured context fits it; the others are
// checked move by move.
TEST(RiskQuality, TheBudgetRefusesOnlyWhenNoContextFits) {
  const Files f;
  json j = with_risk(
      {{"topology", f.topology.string()}, {"quality", {f.h512.string(), f.h2048.string()}}});
  j["policies"]["quality_budget"] = 0.005;
  EXPECT_EQ(problems(j), V{});
  j["policies"]["quality_budget"] = 0.001;
  const V p = problems(j);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("costs ΔNLL 0.002 (risk_kv.quality, its least at any measured context), "
                      "over the quality_budget 0.001"),
            std::string::npos)
      << p[0];
}

}  // namespace
}  // namespace kvshift::input
