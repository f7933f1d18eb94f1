// `kvshift profile`: writes a cost table the strict reader accepts, and fails
// with exit code 2 and a message naming the field on bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/testing/model_folder.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string fixture(const char* name) {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/" + name;
}

TEST(ProfileCli, WritesAValidCostTable) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-test.json";
  std::filesystem::remove(out);
  // Configs without weights: seeded random weights of their shapes, and the table says so.
  const auto r = run_kvshift("profile --backend cpu --model " + fixture("tiny_llama") +
                             "/config.json --proxy " + fixture("tiny_qwen2") +
                             "/config.json --tokens 8,24 --sharing 1,3 --decode-batch 1,2 "
                             "--decode-context 16 --repeats 3 --warmup 0 --out " +
                             out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(slurp(out));
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["model"], "tiny_llama");
  EXPECT_EQ(j["proxy"], "tiny_qwen2");
  EXPECT_EQ(j["machine"]["gpu"], "none");
  EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
  EXPECT_TRUE(j["machine"]["versions"].contains("eigen"));
  EXPECT_EQ(j["machine"]["date"].get<std::string>().size(), 20u);
  EXPECT_EQ(j["inputs"]["weights"], "seeded random");
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
  EXPECT_EQ(per_op["decode"], 2);                 // batches 1 and 2 at 16 tokens of context each
  EXPECT_EQ(per_op.count("predictor_load"), 0u);  // no real predictors
  EXPECT_EQ(per_op.count("reconstruct"), 0u);     // two layers: no group can be omitted
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

TEST(ProfileCli, AFolderAsOutIsRefusedBeforeMeasuring) {
  const fs::path dir = fs::path(KVSHIFT_BINARY_DIR) / "profile-cli-out-folder";
  fs::create_directories(dir);
  auto r = run_kvshift("profile --model smollm2-135m --out " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: " + dir.string() + " is a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "nothing was measured";
  r = run_kvshift("profile --model smollm2-135m --out /proc/kvshift-no-such/t.json");
  EXPECT_EQ(r.exit_code, 2) << "a place that cannot hold the file fails before measuring";
  EXPECT_NE(r.err.find("--out: cannot create /proc/kvshift-no-such"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = run_kvshift("profile --model smollm2-135m --proxy-layers 0 --out " +
                  (dir / "t.json").string());
  EXPECT_EQ(r.exit_code, 2) << "--proxy-layers 0 is refused, not silently no proxy";
  EXPECT_NE(r.err.find("--proxy-layers"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(ProfileCli, ARealModelFolderTimesItsOwnWeightsAndTheTrainedMapper) {
  // The parity mapper (6 proxy channels -> 5 targets) fits a 5-layer, 1-KV-head target whose
  // first 3 layers of 2 heads are the proxy.
  const fs::path dir = fs::path(KVSHIFT_BINARY_DIR) / "profile-cli-real";
  fs::remove_all(dir);
  write_llama_folder(dir / "model", {.hidden = 16, .layers = 5, .heads = 2, .kv_heads = 1});
  const fs::path mapper = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/mapper_parity";
  const std::string out = (dir / "costs.json").string();
  const auto r = run_kvshift("profile --model " + (dir / "model").string() + " --proxy-layers 3" +
                             " --mapper " + (mapper / "mapper.safetensors").string() +
                             " --topology none --tokens 16 --sharing 1 --decode-batch 1 "
                             "--decode-context 16 --repeats 1 --warmup 0 --out " +
                             out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(slurp(out));
  EXPECT_EQ(j["inputs"]["weights"], "real");
  EXPECT_EQ(j["inputs"]["model"]["path"], (dir / "model").string());
  EXPECT_TRUE(j["inputs"]["model"]["digest"].get<std::string>().starts_with("fnv1a64:"));
  EXPECT_EQ(j["inputs"]["mapper"]["path"], (mapper / "mapper.safetensors").string());
  EXPECT_NE(j["inputs"]["proxy"]["path"].get<std::string>().find("first 3 layers"),
            std::string::npos);
  std::map<std::string, int> per_op;
  for (const auto& e : j["entries"]) per_op[e["op"]]++;
  EXPECT_EQ(per_op["prefill"], 1);
  EXPECT_EQ(per_op["proxy_score"], 1);
  EXPECT_EQ(per_op["decode"], 1);
  EXPECT_EQ(per_op.count("reconstruct"), 0u);
  // A proxy that does not fit the mapper, named.
  const auto bad =
      run_kvshift("profile --model " + (dir / "model").string() + " --proxy-layers 2 --mapper " +
                  (mapper / "mapper.safetensors").string() + " --topology none --out " + out);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--mapper"), std::string::npos) << bad.err;
  // Real weights are never mixed with random predictors: without --predictors the
  // reconstruction is left out of the table, and the output says so.
  write_llama_folder(dir / "eight", {.hidden = 16, .layers = 8, .heads = 2, .kv_heads = 1});
  const auto no_predictors = run_kvshift("profile --model " + (dir / "eight").string() +
                                         " --topology G2 --tokens 16 --decode-batch 1 "
                                         "--decode-context 16 --repeats 1 --out " +
                                         out);
  ASSERT_EQ(no_predictors.exit_code, 0) << no_predictors.err;
  EXPECT_NE(no_predictors.out.find("reconstruct, predictor_load: not timed (give --predictors"),
            std::string::npos)
      << no_predictors.out;
  for (const auto& e : json::parse(slurp(out))["entries"]) EXPECT_NE(e["op"], "reconstruct");
  fs::remove_all(dir);
}

TEST(ProfileCli, AModelWithoutWeightsTimesTheTrainedMapperOnItsTruncatedProxysShape) {
  // A config alone (seeded random weights) with --proxy-layers: the proxy is the shape of its
  // first k layers, and the trained mapper is timed as it is; a shape it does not fit is named.
  const fs::path dir = fs::path(KVSHIFT_BINARY_DIR) / "profile-cli-shape";
  fs::remove_all(dir);
  write_llama_folder(dir / "model", {.hidden = 16, .layers = 5, .heads = 2, .kv_heads = 1});
  const std::string config = (dir / "model/config.json").string();
  const fs::path mapper = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/mapper_parity";
  const std::string out = (dir / "costs.json").string();
  const std::string common = " --mapper " + (mapper / "mapper.safetensors").string() +
                             " --topology none --tokens 16 --sharing 1 --decode-batch 1 "
                             "--decode-context 16 --repeats 1 --warmup 0 --out " +
                             out;
  const auto r = run_kvshift("profile --model " + config + " --proxy-layers 3" + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("weights: seeded random"), std::string::npos) << r.out;
  const json j = json::parse(slurp(out));
  EXPECT_EQ(j["inputs"]["mapper"]["path"], (mapper / "mapper.safetensors").string());
  int scored = 0;
  for (const auto& e : j["entries"]) scored += e["op"] == "proxy_score" ? 1 : 0;
  EXPECT_EQ(scored, 1);
  const auto bad = run_kvshift("profile --model " + config + " --proxy-layers 2" + common);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--mapper"), std::string::npos) << bad.err;
  const auto both =
      run_kvshift("profile --model " + config + " --proxy-layers 3 --proxy " + config + common);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--proxy and --proxy-layers"), std::string::npos) << both.err;
  const auto too_many = run_kvshift("profile --model " + config + " --proxy-layers 5" + common);
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.err.find("--proxy-layers: a truncated proxy keeps 1 to 4"), std::string::npos)
      << too_many.err;
  fs::remove_all(dir);
}

TEST(ProfileCli, CudaBackendSaysWhyItCannotRunWhenNotCompiledOrNoDevice) {
  const std::string out = std::string(KVSHIFT_BINARY_DIR) + "/profile-cli-cuda.json";
  const auto r = run_kvshift("profile --backend cuda --model " + fixture("tiny_llama") +
                             " --tokens 8 --sharing 1 --repeats 1 --out " + out);
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.exit_code, 2) << "an input error (the asked backend cannot run), never a crash";
  EXPECT_NE(r.err.find("kvshift: "), std::string::npos) << r.err;
  std::string lower = r.err;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_NE(lower.find("cuda"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvshift::testing
