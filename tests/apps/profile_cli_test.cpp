// `kvshift profile`: writes a cost table the strict reader accepts, and fails
// with exit code 2 and a message naming the field on bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

using nlohmann::json;

std::string fixture(const char* name) {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/" + name;
}

TEST(ProfileCli, WritesAValidCostTable) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-test.json";
  std::filesystem::remove(out);
  const auto r = run_kvshift("profile --backend cpu --model " + fixture("tiny_llama") +
                             " --proxy " + fixture("tiny_qwen2") +
                             " --tokens 8,24 --sharing 1,3 --repeats 3 --warmup 0 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(slurp(out));
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["model"], "tiny_llama");
  EXPECT_EQ(j["proxy"], "tiny_qwen2");
  EXPECT_EQ(j["machine"]["gpu"], "none");
  EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
  EXPECT_TRUE(j["machine"]["versions"].contains("eigen"));
  EXPECT_EQ(j["machine"]["date"].get<std::string>().size(), 20u);
  std::map<std::string, int> per_op;
  for (const auto& e : j["entries"]) {
    per_op[e["op"]]++;
    EXPECT_EQ(e["repeats"], 3);
    EXPECT_GT(e["median_s"].get<double>(), 0.0);
    EXPECT_LE(e["p10_s"].get<double>(), e["median_s"].get<double>());
    EXPECT_LE(e["median_s"].get<double>(), e["p90_s"].get<double>());
    for (const char* k : {"op", "tokens", "sharing", "median_s", "p10_s", "p90_s", "repeats"}) {
      EXPECT_TRUE(e.contains(k)) << k;
    }
  }
  EXPECT_EQ(per_op["prefill"], 2);
  EXPECT_EQ(per_op["proxy_score"], 2);
  EXPECT_EQ(per_op["prune"], 2);
  EXPECT_EQ(per_op.count("reconstruct"), 0u);  // two layers: no group can be omitted
}

TEST(ProfileCli, MeasuresReconstructionForEachSharingCount) {
  // A small 8-layer Llama config (random weights are drawn from its shape).
  const std::string dir = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-8layer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 8,
             "vocab_size": 256, "rms_norm_eps": 1e-5})";
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-recon.json";
  const auto r = run_kvshift("profile --model " + dir +
                             " --topology G2,G3 --tokens 16 "
                             "--sharing 1,2 --repeats 1 --warmup 0 --out " +
                             out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(slurp(out));
  EXPECT_EQ(j["topology"], "G2,G3");
  std::vector<std::int64_t> sharing;
  for (const auto& e : j["entries"]) {
    if (e["op"] == "reconstruct") sharing.push_back(e["sharing"]);
  }
  EXPECT_EQ(sharing, (std::vector<std::int64_t>{1, 2}));
}

TEST(ProfileCli, BadInputExitsWithTwoAndNamesTheField) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-bad.json";
  auto r = run_kvshift("profile --model smollm2-135m --tokens 128,abc --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tokens"), std::string::npos) << r.err;
  r = run_kvshift("profile --backend tpu --model smollm2-135m --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend"), std::string::npos) << r.err;
  r = run_kvshift("profile --model no-such-model --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ProfileCli, CudaBackendSaysWhyItCannotRunWhenNotCompiledOrNoDevice) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-cuda.json";
  const auto r = run_kvshift("profile --backend cuda --model " + fixture("tiny_llama") +
                             " --tokens 8 --sharing 1 --repeats 1 --out " + out);
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("kvshift: "), std::string::npos) << r.err;
  std::string lower = r.err;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_NE(lower.find("cuda"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvshift::testing
