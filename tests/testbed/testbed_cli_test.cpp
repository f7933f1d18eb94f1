// `kvshift testbed` as a user runs it: real agents on loopback, testbed.csv against the cost
// model, exit code 2 with the flag or field named for bad input. Models: the tiny fixtures
// (tests/fixtures) and tiny configs with seeded random weights, so CI needs no real model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/testing/run_command.hpp"
#include "util/csv.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) { return scratch_dir("testbed", name); }

/// A scenario of `nodes` GPU nodes joined to a switch, `strategies` and a drain of gpu0.
std::string scenario(const std::string& model, const std::string& strategies, int nodes,
                     const std::string& extra, bool drain = true) {
  std::ostringstream s;
  s << R"({"name": "tb", "model": ")" << model << R"(", "gpu": "h200",
    "cluster": {"node": {"gpus": 1}, "star": {"nodes": )"
    << nodes << R"(, "bandwidth": "200Mbps", "latency": "1ms"}},
    "workload": {"arrival": "poisson", "rate": 1, "max_requests": 1,
                 "prompt_tokens": {"distribution": "uniform", "min": 40, "max": 90},
                 "output_tokens": {"distribution": "fixed", "value": 10}},
    "policies": {"strategies": [)"
    << strategies << "]}," << extra;
  if (drain) s << R"("events": [{"type": "drain", "at": "1s", "node": "gpu0"}],)";
  s << R"("duration": "10s"})";
  return s.str();
}

std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::vector<std::string>> rows;
  for (std::vector<std::string> cells; util::read_csv_record(in, cells);) rows.push_back(cells);
  return rows;
}

std::size_t column(const std::vector<std::string>& header, const std::string& name) {
  return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
}

TEST(TestbedCli, ReplaysTheDrainWithEveryStrategyOnTheTinyFixture) {
  const fs::path dir = scratch("drain");
  const std::string fixture = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama";
  // The proxy: the fixture's shape with one layer (only its spec is read here).
  std::ofstream(dir / "proxy.json") << R"({"hidden_size": 32, "intermediate_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
    "vocab_size": 96, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})";
  std::ofstream(dir / "s.json") << scenario(
      fixture + "/config.json", R"("full_kv", "token_replay", "proxy_kv")", 3,
      R"("proxy_kv": {"proxy_model": ")" + (dir / "proxy.json").string() +
          R"(", "retention": 0.5, "delta_nll": 0.01},)");
  const auto r =
      run_kvshift("testbed " + (dir / "s.json").string() + " --model-dir " + fixture +
                  " --faults drop=0.01,corrupt=0.01,seed=2 --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_csv(dir / "out" / "testbed.csv");
  ASSERT_EQ(rows.size(), 4u);  // header + one move per strategy
  const auto& h = rows[0];
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row[column(h, "state")], "completed");
    EXPECT_EQ(row[column(h, "src")], "gpu0");
    EXPECT_GT(std::stod(row[column(h, "predicted_transfer_s")]), 0.002);  // two 1 ms hops
    EXPECT_GT(std::stod(row[column(h, "transfer_s")]), 0.002);
    const std::string strategy = row[column(h, "strategy")];
    if (strategy != "proxy_kv") {  // ProxyKV also ships its kept token indices
      EXPECT_EQ(row[column(h, "bytes")], row[column(h, "planned_bytes")]) << strategy;
    }
    if (strategy == "token_replay") {
      EXPECT_EQ(row[column(h, "work")], "prefill");
    }
    // What the move did to the text: replay rebuilds the source's KV exactly; full KV ships it
    // rounded to the wire's fp16; ProxyKV drops half the tokens.
    EXPECT_EQ(row[column(h, "continuation_tokens")], "32");
    const double agree = std::stod(row[column(h, "greedy_agreement")]);
    const double real = std::stod(row[column(h, "real_delta_nll")]);
    EXPECT_GE(agree, 0.0);
    EXPECT_LE(agree, 1.0);
    if (strategy == "token_replay") {
      EXPECT_EQ(agree, 1.0);
      EXPECT_EQ(std::stod(row[column(h, "sampled_agreement")]), 1.0);
      EXPECT_EQ(real, 0.0);
    }
    if (strategy == "full_kv") {
      EXPECT_LT(std::abs(real), 1e-2);
    }
    if (strategy == "proxy_kv") {
      EXPECT_EQ(row[column(h, "charged_delta_nll")], "0.01");
    }
  }
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
  EXPECT_EQ(summary["quality"]["token_replay"]["real_delta_nll_median"], 0.0);
  EXPECT_NE(summary["quality_note"].get<std::string>().find("seeded random contexts"),
            std::string::npos);
  EXPECT_EQ(summary["address"], "127.0.0.1");
  std::stringstream svg;
  svg << std::ifstream(dir / "out" / "testbed.svg").rdbuf();
  EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
  std::size_t circles = 0;
  for (auto at = svg.str().find("<circle"); at != std::string::npos;
       at = svg.str().find("<circle", at + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 6u);  // one point per move, one legend mark per strategy
  EXPECT_EQ(summary["failed"], 0);
  fs::remove_all(dir);
}

/// An 8-layer Llama config.json in `dir` (seeded random weights: no weights file).
void write_tiny_config(const fs::path& dir) {
  std::ofstream(dir / "config.json") << R"({"hidden_size": 32, "intermediate_size": 48,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 8,
    "vocab_size": 64, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})";
}

TEST(TestbedCli, SyntheticRiskKvMovesReconstructWithSeededPredictors) {
  const fs::path dir = scratch("risk");
  write_tiny_config(dir);
  std::ofstream(dir / "s.json") << scenario(
      (dir / "config.json").string(), R"("risk_kv", "full_kv")", 4,
      R"("risk_kv": {"topology": "G2", "delta_nll": 0.01},)", false);
  const auto r = run_kvshift("testbed " + (dir / "s.json").string() + " --moves 6 --out " +
                             (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_csv(dir / "out" / "testbed.csv");
  ASSERT_EQ(rows.size(), 7u);
  const auto& h = rows[0];
  int rebuilt = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][column(h, "state")], "completed");
    EXPECT_NE(rows[i][column(h, "src")], rows[i][column(h, "dst")]);
    if (rows[i][column(h, "strategy")] == "risk_kv") {
      ++rebuilt;
      EXPECT_EQ(rows[i][column(h, "work")], "reconstruct");
      EXPECT_GT(std::stod(rows[i][column(h, "predicted_compute_s")]), 0);
    }
  }
  EXPECT_EQ(rebuilt, 3);
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
  EXPECT_NE(summary["weights"].get<std::string>().find("seeded random"), std::string::npos);
  EXPECT_NE(summary["predictors"].get<std::string>().find("seeded random"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TestbedCli, ATopologyWithSinkRowsIsRefusedNotSentAsWholeLayers) {
  const fs::path dir = scratch("sink");
  write_tiny_config(dir);
  std::ofstream(dir / "topology.json") << R"({"omitted_groups": [2], "sink_rows": 1})";
  std::ofstream(dir / "s.json") << scenario(
      (dir / "config.json").string(), R"("risk_kv", "full_kv")", 4,
      R"("risk_kv": {"topology": ")" + (dir / "topology.json").string() +
          R"(", "delta_nll": 0.01},)",
      false);
  const auto r = run_kvshift("testbed " + (dir / "s.json").string() + " --moves 2 --out " +
                             (dir / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("sink_rows 1: the testbed sends whole layers"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

void expect_input_error(const std::string& args, const std::string& part) {
  const auto r = run_kvshift(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
}

TEST(TestbedCli, BadInputNamesTheFlagOrFieldAndExitsTwo) {
  const fs::path dir = scratch("bad");
  const std::string fixture = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama";
  std::ofstream(dir / "s.json") << scenario(fixture + "/config.json", R"("full_kv")", 3, "");
  std::ofstream(dir / "big.json") << scenario(fixture + "/config.json", R"("full_kv")", 17, "");
  std::ofstream(dir / "quiet.json")
      << scenario(fixture + "/config.json", R"("full_kv")", 3, "", false);
  std::ofstream(dir / "hybrid.json")
      << scenario(fixture + "/config.json", R"("full_kv", "hybrid")", 3, "");
  const std::string s = (dir / "s.json").string(), out = " --out " + (dir / "o").string();
  expect_input_error("testbed " + s + " --faults dorp=0.1" + out, "--faults");
  expect_input_error("testbed " + s + " --faults drop=-0.5" + out, "drop");
  // Every frame lost: refused at once, not a silent 10-minute wait.
  expect_input_error("testbed " + s + " --moves 1 --faults drop=1" + out, "nothing ever arrives");
  expect_input_error("testbed " + s + " --faults delay=-5ms" + out, "delay");
  expect_input_error("testbed " + s + " --moves -3" + out, "--moves");
  expect_input_error("testbed " + s + " --moves 20000" + out, "--moves");
  expect_input_error("testbed " + s + " --continue -1" + out, "--continue");
  expect_input_error("testbed " + s + " --corpus " + (dir / "no.tokens").string() + out,
                     "no.tokens");
  expect_input_error("testbed " + (dir / "big.json").string() + out, "too big to run as agents");
  expect_input_error("testbed " + (dir / "quiet.json").string() + out, "--moves");
  expect_input_error("testbed " + (dir / "hybrid.json").string() + out,
                     "policies.strategies: the testbed does not run \"hybrid\"");
  expect_input_error("testbed --probe --bandwidth -5Mbps" + out, "--bandwidth");
  expect_input_error("testbed --probe --flows 0" + out, "--flows");
  fs::create_directories(dir / "exists" / "x");
  expect_input_error("testbed " + s + " --out " + (dir / "exists").string(), "--out");
  fs::remove_all(dir);
}

TEST(TestbedCli, ProbeMeasuresTheCeilingAndContendingFlows) {
  const fs::path dir = scratch("probe");
  const auto r = run_kvshift(
      "testbed --probe --bytes 250KB --bandwidth 50Mbps --flows 1,3"
      " --latency 2ms --repeats 1 --ceiling-bytes 8MB --out " +
      (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
  EXPECT_GT(summary["loopback_ceiling_bps"].get<double>(), 50e6);
  const auto rows = read_csv(dir / "out" / "probe.csv");
  ASSERT_EQ(rows.size(), 5u);  // header, 1 flow, 3 flows
  const auto& h = rows[0];
  const double alone = std::stod(rows[1][column(h, "simulator_s")]);
  EXPECT_NEAR(alone, 0.002 + 8 * 250e3 / 50e6, 1e-6);  // the network model on an idle link
  for (std::size_t i = 2; i < rows.size(); ++i) {
    EXPECT_NEAR(std::stod(rows[i][column(h, "simulator_s")]), 0.002 + 3 * 8 * 250e3 / 50e6, 1e-6);
    // Three flows sharing fairly take about three times as long as one (loose on a busy box).
    EXPECT_GT(std::stod(rows[i][column(h, "measured_s")]), 0.9 * (0.002 + 3 * 0.04));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshift::testing
