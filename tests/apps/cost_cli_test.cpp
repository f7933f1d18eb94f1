#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

using nlohmann::json;

TEST(CostCli, JsonHasTheStableFieldNames) {
  const auto r = run_kvshift(
      "cost --model qwen2.5-0.5b --topology paper --tokens 512 --bandwidth 100Mbps "
      "--latency 10ms --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["model"], "qwen2.5-0.5b");
  EXPECT_EQ(j["tokens"], 512);
  EXPECT_EQ(j["omitted_layers"], json({2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(j["kv_bytes_full"], 6 * 1048576);
  EXPECT_EQ(j["kv_bytes_saved"], 2 * 1048576);
  EXPECT_EQ(j["kv_bytes_kept"], 4 * 1048576);
  EXPECT_NEAR(j["omitted_fraction"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_EQ(j["predictor"]["dtype"], "fp32");
  EXPECT_EQ(j["predictor"]["bytes_per_group"], 2'099'200);
  EXPECT_EQ(j["predictor"]["bytes_total"], 4 * 2'099'200);
  EXPECT_TRUE(j["predictor"].contains("unfolded_bytes_per_group"));
  EXPECT_EQ(j["sharing"]["requests"], 1);
  EXPECT_EQ(j["sharing"]["break_even_requests"], 5);
  EXPECT_TRUE(j["sharing"].contains("net_saving_bytes"));
  const json& l = j["latency"];
  EXPECT_EQ(l["bandwidth_bps"], 100e6);
  EXPECT_EQ(l["latency_s"], 0.01);
  for (const char* k : {"full_kv_s", "token_replay_s", "risk_kv_s", "risk_kv_with_predictor_s",
                        "crossover_full_bps", "crossover_replay_bps"}) {
    EXPECT_TRUE(l.contains(k)) << k;
  }
  EXPECT_NEAR(l["full_kv_s"].get<double>(), 0.01 + 8.0 * 6 * 1048576 / 100e6, 1e-12);
}

TEST(CostCli, PricesTheHybridSplitAndAPrefixRecomputeFromAStaleReplica) {
  const auto r = run_kvshift(
      "cost --model qwen2.5-0.5b --tokens 4096 --bandwidth 10Gbps --gpu h100 --held 3000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json l = json::parse(r.out)["latency"];
  EXPECT_EQ(l["held_tokens"], 3000);
  const std::int64_t front = l["hybrid_front_tokens"].get<std::int64_t>();
  EXPECT_GT(front, 0);
  EXPECT_LT(front, 4096);
  EXPECT_EQ(front % 16, 0) << "split on a block boundary";
  // Never slower than either end of the split.
  EXPECT_LE(l["hybrid_s"].get<double>(), l["full_kv_s"].get<double>());
  EXPECT_LE(l["hybrid_s"].get<double>(), l["token_replay_s"].get<double>());
  // The stale prefix ships less than the full KV and pays a tail prefill on top.
  EXPECT_GT(l["prefix_recompute_s"].get<double>(), 0);
  const auto table = run_kvshift(
      "cost --model qwen2.5-0.5b --tokens 4096 --bandwidth 10Gbps "
      "--gpu h100 --held 3000");
  EXPECT_NE(table.out.find("3000 tokens' KV shipped, the ids of the other 1096 with it"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("tokens sent first and recomputed, the KV of the rest shipped"),
            std::string::npos)
      << table.out;
}

// The audit's case: over 10 Mbps and 10 ms a hybrid that recomputes everything was priced
// at 11.2 ms (the prefill alone) because its token ids travelled for free. It is token replay
// and can never beat the latency plus the ids' transfer.
TEST(CostCli, AHybridPaysForTheIdsOfWhatItRecomputes) {
  const auto r = run_kvshift(
      "cost --model qwen2.5-1.5b --tokens 2048 --bandwidth 10Mbps --latency 10ms --gpu h100 "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json l = json::parse(r.out)["latency"];
  const double ids_s = 0.010 + 8.0 * 4 * 2048 / 10e6;
  EXPECT_GE(l["hybrid_s"].get<double>(), ids_s);
  EXPECT_EQ(l["hybrid_front_tokens"], 2048);
  EXPECT_DOUBLE_EQ(l["hybrid_s"].get<double>(), l["token_replay_s"].get<double>());
  const auto table = run_kvshift(
      "cost --model qwen2.5-1.5b --tokens 2048 --bandwidth 10Mbps --latency 10ms --gpu h100");
  EXPECT_NE(table.out.find("all 2048 tokens recomputed from their ids: token replay"),
            std::string::npos)
      << table.out;
}

TEST(CostCli, AHeldPrefixMustBeShorterThanTheRequestAndNeedsAPath) {
  const auto whole = run_kvshift("cost --tokens 512 --bandwidth 1Gbps --held 512");
  EXPECT_EQ(whole.exit_code, 2);
  EXPECT_NE(whole.err.find("--held: must be in [0, --tokens)"), std::string::npos) << whole.err;
  const auto no_path = run_kvshift("cost --tokens 512 --held 100");
  EXPECT_EQ(no_path.exit_code, 2);
  EXPECT_NE(no_path.err.find("--held: needs --bandwidth"), std::string::npos) << no_path.err;
}

TEST(CostCli, Fp16PredictorAndSharingFlags) {
  const auto r = run_kvshift(
      "cost --model tinyllama-1.1b --topology G2,G5 --predictor fp16 "
      "--sharing 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["predictor"]["bytes_per_group"], 4'196'352);
  EXPECT_EQ(j["sharing"]["net_saving_bytes"], 8LL * 2 * 1048576 - 2 * 4'196'352);
  EXPECT_FALSE(j.contains("latency"));
}

TEST(CostCli, TableIsReadable) {
  const auto r = run_kvshift("cost --model qwen2.5-0.5b --bandwidth 1Gbps");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2.000 MiB  (33.3 %)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("break-even requests"), std::string::npos);
  EXPECT_NE(r.out.find("full KV transfer"), std::string::npos);
}

TEST(CostCli, PaperWritesItsOutputFile) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/test-out/cost-paper.json";
  std::filesystem::remove(out);
  const auto r = run_kvshift("cost --paper --bandwidth 100Mbps --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos);
  const json j = json::parse(slurp(out));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[2]["model"], "tinyllama-1.1b");
  EXPECT_EQ(j[2]["topology"], "G2,G5");
}

struct BadCase {
  const char* args;
  const char* says;
  friend void PrintTo(const BadCase& c, std::ostream* os) { *os << "kvshift " << c.args; }
};

class CostCliBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(CostCliBadInput, ExitsTwoWithAClearMessage) {
  const auto r = run_kvshift(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(GetParam().says), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CostCliBadInput,
    ::testing::Values(BadCase{"cost --model nope", "known: qwen2.5-0.5b"},
                      BadCase{"cost --bandwidth 100mbit", "--bandwidth: expected a bandwidth"},
                      BadCase{"cost --bandwidth 0Mbps", "--bandwidth: must be > 0"},
                      BadCase{"cost --tokens 0", "--tokens: must be > 0"},
                      BadCase{"cost --tokens -4", "--tokens"},
                      BadCase{"cost --tokens many", "--tokens"},
                      BadCase{"cost --topology G1", "G1 has 0 kept layer(s) on its left"},
                      BadCase{"cost --model tinyllama-1.1b --topology G40", "G40 is out of range"},
                      BadCase{"cost --predictor int4", "--predictor: expected one of"},
                      BadCase{"cost --latency 10ms", "--latency: needs --bandwidth"},
                      BadCase{"cost --gpu tpu", "known: h200"},
                      BadCase{"cost --model /nonexistent/config.json", "cannot open file"},
                      BadCase{"cost --paper --model qwen2.5-1.5b",
                              "--paper and --model: --paper evaluates the paper's three models"},
                      BadCase{"frobnicate", "frobnicate"}));

TEST(CostCli, MalformedConfigJsonIsAnInputError) {
  const std::string dir = std::string(KVSHIFT_BINARY_DIR) + "/test-out/badmodel";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/config.json") << R"({"model_type": "llama", "hidden_size": "big"})"; }
  const auto r = run_kvshift("cost --model " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/hidden_size: expected an integer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/num_hidden_layers: is required"), std::string::npos) << r.err;
}

TEST(CostCli, EveryCommandThatPricesMovesRefusesASlidingWindowModel) {
  // Gemma 3 keeps a sliding layer's keys for its window only; the closed forms would count
  // them over the whole context. calibrate and quality run such a model; these refuse it.
  const std::string gemma = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_gemma3";
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/test-out/gemma-refused";
  for (const std::string args :
       {"cost --model " + gemma, "sweep --analytic --model " + gemma + " --out " + out,
        "profile --backend cpu --model " + gemma + " --out " + out + ".json"}) {
    const auto r = run_kvshift(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("has sliding-window layers"), std::string::npos) << args << "\n" << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".json"));
}

TEST(Cli, HelpListsCommandsAndExitsZero) {
  const auto r = run_kvshift("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("cost"), std::string::npos);
  EXPECT_NE(r.out.find("models"), std::string::npos);
  const auto c = run_kvshift("cost --help");
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_NE(c.out.find("--bandwidth"), std::string::npos);
}

TEST(Cli, ModelsListsTheRegistry) {
  const auto r = run_kvshift("models --json");
  ASSERT_EQ(r.exit_code, 0);
  const json j = json::parse(r.out);
  EXPECT_GE(j.size(), 6u);
  EXPECT_EQ(j[0]["name"], "qwen2.5-0.5b");
}

}  // namespace
}  // namespace kvshift::testing
