// `kvshift calibrate`: a run on a small seeded model folder writes the four
// outputs (and the topology feeds `kvshift cost --topology`); bad input — a
// short corpus, a vocabulary mismatch, a model without interior groups, bad
// options — exits 2 with a message naming the problem and writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/testing/file_digest.hpp"
#include "tests/testing/model_folder.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CalibrateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run_kvshift("calibrate --help").exit_code != 0) {
      GTEST_SKIP() << "this build has no calibrate command (kvshift_calibrate not built)";
    }
    // One folder per test: ctest runs the tests of this file in parallel processes.
    dir_ = fs::path(KVSHIFT_BINARY_DIR) / "calibrate-cli-test" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    write_llama_folder(dir_ / "model", {.vocab = 40});
    write_token_file(dir_ / "corpus.tokens", 3000, 40);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string base() const {
    return "calibrate --model " + (dir_ / "model").string() + " --corpus " +
           (dir_ / "corpus.tokens").string() + " --threads 2";
  }
  fs::path dir_;
};

TEST_F(CalibrateCli, WritesTheFiveOutputsAndTheCostModelReadsTheTopology) {
  const auto r = run_kvshift(base() +
                             " --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 "
                             "--eps 1e9 --predictor-dtype fp16 --out " +
                             (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"topology.json", "predictors.safetensors", "report.json", "report.md", "frontier.svg"}) {
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
  }
  const json report = json::parse(slurp((dir_ / "out" / "report.json").string()));
  for (const char* k :
       {"model", "gate", "eps", "omitted_groups", "omitted_fraction", "wall_time_s"}) {
    EXPECT_TRUE(report.contains(k)) << k;
  }
  EXPECT_EQ(report["gate"], "upper90");
  // eps = 1e9 accepts every prefix: all interior groups (G2, G3) are omitted.
  EXPECT_EQ(report["omitted_groups"], json({2, 3}));
  EXPECT_DOUBLE_EQ(report["omitted_fraction"].get<double>(), 0.5);
  for (const char* k : {"ppl_exact", "ppl_reconstructed", "delta_nll_mean", "delta_nll_upper90",
                        "violation_share", "violation_share_ci95", "requests"}) {
    EXPECT_TRUE(report["test"].contains(k)) << k;
  }
  EXPECT_TRUE(report["selection"]["cross_fitted"].get<bool>());
  // Frontier: mean, upper90, share:0.1 at eps 0.001, 0.002, 0.005, 0.01 and 1e9.
  EXPECT_EQ(report["frontier"].size(), 15u);
  const json topo = json::parse(slurp((dir_ / "out" / "topology.json").string()));
  EXPECT_EQ(topo["quality"]["set"], "test");
  EXPECT_TRUE(topo["quality"].contains("violation_share"));
  EXPECT_EQ(report["test"]["delta_nll_ci95"].size(), 2u);
  EXPECT_EQ(report["test"]["requests"], 2);
  const auto cost = run_kvshift("cost --model " + (dir_ / "model").string() + " --topology " +
                                (dir_ / "out" / "topology.json").string() + " --json");
  EXPECT_EQ(cost.exit_code, 0) << cost.err;
  // `kvshift quality` measures the same topology with the predictors written beside it.
  const auto q = run_kvshift("quality --model " + (dir_ / "model").string() + " --corpus " +
                             (dir_ / "corpus.tokens").string() +
                             " --history 64 --eval 16 --windows 8 --threads 2 --policy exact "
                             "--policy risk-kv:" +
                             (dir_ / "out" / "topology.json").string() + " --out " +
                             (dir_ / "quality").string());
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const json measured = json::parse(slurp((dir_ / "quality" / "quality.json").string()));
  ASSERT_EQ(measured["rows"].size(), 2u);
  const json& risk = measured["rows"][1];
  EXPECT_EQ(risk["method"], "risk-kv");
  EXPECT_TRUE(risk["retention"].is_null());
  // It names the topology it measured, so a scenario charging it can check it is its own.
  EXPECT_EQ(risk["topology"]["omitted_groups"], json({2, 3}));
  EXPECT_EQ(risk["topology"]["digest"], fnv1a64_of_file((dir_ / "out" / "topology.json").string()));
  ASSERT_EQ(risk["per_request"].size(), 8u);
  bool changed = false;  // rebuilt layers are not the exact ones
  for (const json& d : risk["per_request"]) changed |= d.get<double>() != 0.0;
  EXPECT_TRUE(changed);
}

// Groups of one layer with one anchor layer on each side: every layer but the first and the
// last is a candidate, and the topology.json says its widths so that readers rebuild the same
// groups and anchors.
TEST_F(CalibrateCli, GroupAndAnchorWidthsReachTheTopology) {
  const auto r = run_kvshift(base() +
                             " --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 "
                             "--eps 1e9 --group-width 1 --anchor-width 1 --out " +
                             (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json topo = json::parse(slurp((dir_ / "out" / "topology.json").string()));
  EXPECT_EQ(topo["group_width"], 1);
  EXPECT_EQ(topo["anchor_width"], 1);
  EXPECT_EQ(topo["omitted_groups"], json({2, 3, 4, 5, 6, 7}));
  const auto cost = run_kvshift("cost --model " + (dir_ / "model").string() + " --topology " +
                                (dir_ / "out" / "topology.json").string() + " --json");
  ASSERT_EQ(cost.exit_code, 0) << cost.err;
  EXPECT_NE(cost.out.find("G2,G3,G4,G5,G6,G7"), std::string::npos) << cost.out;
}

// The greedy order: every candidate once in the order, each prefix's mean on the order set in
// report.json and report.md, and the prefixes gated are the order's.
TEST_F(CalibrateCli, GreedyOrderMeasuresEachPrefixOnTheOrderSet) {
  const auto r = run_kvshift(base() +
                             " --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 "
                             "--eps 1e9 --group-width 1 --anchor-width 1 --order greedy --out " +
                             (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rep = json::parse(slurp((dir_ / "out" / "report.json").string()));
  EXPECT_EQ(rep["options"]["order_rule"], "greedy");
  const json& sel = rep["selection"];
  std::vector<int> order = sel["order"].get<std::vector<int>>();
  ASSERT_EQ(sel["order_means"].size(), order.size());  // ε 1e9: nothing stops it
  EXPECT_GE(sel["order_measurements"].get<int>(), static_cast<int>(order.size()) - 1);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<int>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(sel["prefixes"][0]["groups"], json({sel["order"][0]}));
  EXPECT_TRUE(rep["stage_seconds"].contains("select: greedy order"));
  const std::string md = slurp((dir_ / "out" / "report.md").string());
  EXPECT_NE(md.find("Greedy order"), std::string::npos);
  EXPECT_NE(md.find("Prefixes of the greedy order"), std::string::npos);
}

// Sink rows: the count reaches the topology, the predictors and the bytes `kvshift cost` prices;
// `kvshift quality` measures with them, and refuses a topology that disagrees with its predictors.
TEST_F(CalibrateCli, SinkRowsReachTheTopologyThePredictorsAndTheBytesSent) {
  const auto r = run_kvshift(base() +
                             " --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 "
                             "--eps 1e9 --sink-rows 4 --out " +
                             (dir_ / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path topology = dir_ / "out" / "topology.json";
  json topo = json::parse(slurp(topology.string()));
  EXPECT_EQ(topo["sink_rows"], 4);
  EXPECT_EQ(json::parse(slurp((dir_ / "out" / "report.json").string()))["options"]["sink_rows"], 4);
  EXPECT_NE(slurp((dir_ / "out" / "report.md").string()).find("The first 4 row(s)"),
            std::string::npos);
  auto saved = [&](const fs::path& file) {
    const auto cost = run_kvshift("cost --model " + (dir_ / "model").string() + " --topology " +
                                  file.string() + " --tokens 64 --json");
    EXPECT_EQ(cost.exit_code, 0) << cost.err;
    return json::parse(cost.out)["kv_bytes_saved"].get<std::int64_t>();
  };
  const std::int64_t with_sinks = saved(topology);
  const std::string quality = "quality --model " + (dir_ / "model").string() + " --corpus " +
                              (dir_ / "corpus.tokens").string() +
                              " --history 64 --eval 16 --windows 8 --threads 2 --policy exact "
                              "--policy risk-kv:" +
                              topology.string() + " --out ";
  const auto q = run_kvshift(quality + (dir_ / "q").string());
  ASSERT_EQ(q.exit_code, 0) << q.err;
  // The same topology without sink rows saves 4 of 64 rows more, and no longer fits the
  // predictors.
  topo.erase("sink_rows");
  std::ofstream(topology) << topo.dump(2);
  EXPECT_EQ(saved(topology) * 60, with_sinks * 64);
  const auto mismatch = run_kvshift(quality + (dir_ / "q2").string());
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.err.find("the topology sends 0 sink row(s) exact"), std::string::npos)
      << mismatch.err;
  topo["sink_rows"] = -1;
  std::ofstream(topology) << topo.dump(2);
  const auto negative = run_kvshift("cost --model " + (dir_ / "model").string() + " --topology " +
                                    topology.string() + " --json");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("sink_rows"), std::string::npos) << negative.err;
}

TEST_F(CalibrateCli, ShortCorpusExitsTwoAndWritesNothing) {
  const auto r = run_kvshift(base() + " --out " + (dir_ / "out").string());  // 144 × 1024 > 3000
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--corpus"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("147456"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrateCli, AnExistingOutIsRefusedBeforeTheWork) {
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "summary.json") << "{}";
  const auto r = run_kvshift(base() + " --history 24 --eval 12 --out " + (dir_ / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: " + (dir_ / "run").string() + " already exists"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "topology.json")) << "nothing written among its files";
}

TEST_F(CalibrateCli, HistoryAndEvalBeyondTheModelsContextAreRefused) {
  const std::string tiny = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama";
  const auto r =
      run_kvshift("calibrate --model " + tiny + " --corpus " + (dir_ / "corpus.tokens").string() +
                  " --history 120 --eval 12 --out " + (dir_ / "out").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--history: 120 + --eval 12 tokens exceed the model's context of 128"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrateCli, VocabularyMismatchExitsTwo) {
  write_llama_folder(dir_ / "small-vocab", {.vocab = 20});  // the corpus uses ids up to 39
  const auto r = run_kvshift("calibrate --model " + (dir_ / "small-vocab").string() + " --corpus " +
                             (dir_ / "corpus.tokens").string() + " --history 24 --eval 12 --out " +
                             (dir_ / "out").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("vocabulary mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrateCli, BadOptionsExitTwoNamingTheOption) {
  const std::string out = " --out " + (dir_ / "out").string();
  const std::pair<std::string, std::string> cases[] = {
      {" --gate upper95", "--gate"},
      {" --gate share:1.5", "--gate share:1.5"},
      {" --gate share:abc", "--gate share:abc"},
      {" --gate share:0", "--gate share:0"},
      {" --gate share:", "--gate share:"},
      {" --requests fit:3,ordr:2", "did you mean \"order\""},
      {" --requests fit:3,tset:2", "did you mean \"test\""},
      {" --predictor-dtype int8", "--predictor-dtype"},
      {" --groups G1", "G1"},
      {" --groups G99", "--groups: G99 is out of range"},
      {" --group-width 0", "--group-width: expected 1 to 8 layers for the 8-layer model (got 0)"},
      {" --group-width 9", "--group-width: expected 1 to 8 layers"},
      {" --anchor-width 0", "--anchor-width: expected 1 to 8 layers for the 8-layer model (got 0)"},
      {" --anchor-width 3 --groups G2",
       "--groups: G2 has 2 kept layer(s) on its left but its predictor needs 3 exact anchor"},
      {" --anchor-width 3",
       "--groups: the model has no interior 2-layer group to omit (8 layers, "
       "3 anchor layers on each side)"},
      {" --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 --resamples 10",
       "--resamples"},
      {" --history 24 --eval 12 --sink-rows -1", "--sink-rows: must be in 0..23"},
      {" --history 24 --eval 12 --sink-rows 24", "--sink-rows: must be in 0..23"},
      {" --order cheapest", "--order: expected risk-per-byte or greedy (got 'cheapest')"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = run_kvshift(base() + args + out);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrateCli, MissingModelOrCorpusExitsTwoNamingTheOption) {
  const std::string corpus = " --corpus " + (dir_ / "corpus.tokens").string();
  const std::string out = " --out " + (dir_ / "out").string();
  const auto no_model =
      run_kvshift("calibrate --model " + (dir_ / "nothing").string() + corpus + out);
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.err.find("--model: "), std::string::npos) << no_model.err;
  const auto no_corpus = run_kvshift("calibrate --model " + (dir_ / "model").string() +
                                     " --corpus " + (dir_ / "nothing.tokens").string() + out);
  EXPECT_EQ(no_corpus.exit_code, 2);
  EXPECT_NE(no_corpus.err.find("--corpus: "), std::string::npos) << no_corpus.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrateCli, ModelWithoutInteriorGroupsExitsTwo) {
  const std::string tiny = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama";
  write_token_file(dir_ / "c96.tokens", 3000, 96);
  const auto r =
      run_kvshift("calibrate --model " + tiny + " --corpus " + (dir_ / "c96.tokens").string() +
                  " --history 24 --eval 12 --requests fit:3,order:2,select:3,test:2 --out " +
                  (dir_ / "out").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("interior"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvshift::testing
