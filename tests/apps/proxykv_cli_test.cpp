// `kvshift proxykv dataset` on the tiny fixture model (2 layers; vocabulary 96):
// a run writes manifest.json and the shards with windows inside the span, with
// a truncated proxy or a separate proxy folder; bad input exits 2 naming the
// flag and leaves no output folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/testing/model_folder.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A 1-layer Llama folder shaped like the fixture (hidden 32, 4 query / 2 KV heads of 8) with
/// seeded weights and `vocab` tokens.
void write_proxy(const fs::path& dir, int vocab) {
  write_llama_folder(dir,
                     {.hidden = 32,
                      .layers = 1,
                      .heads = 4,
                      .kv_heads = 2,
                      .head_dim = 8,
                      .intermediate = 64,
                      .vocab = vocab,
                      .tied = true},
                     5);
}

/// The "starts" I64 tensor of a shard file.
std::vector<std::int64_t> shard_starts(const fs::path& file) {
  const std::string bytes = slurp(file.string());
  std::uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const json header = json::parse(bytes.substr(8, len));
  const auto& t = header.at("starts");
  EXPECT_EQ(t.at("dtype"), "I64");
  const std::size_t begin = t.at("data_offsets")[0], end = t.at("data_offsets")[1];
  std::vector<std::int64_t> out((end - begin) / 8);
  std::memcpy(out.data(), bytes.data() + 8 + len + begin, end - begin);
  return out;
}

class ProxykvCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run_kvshift("proxykv dataset --help").exit_code != 0) {
      GTEST_SKIP() << "this build has no proxykv command (kvshift_calibrate not built)";
    }
    // One folder per test and process: ctest runs the tests in parallel.
    dir_ = fs::temp_directory_path() /
           ("kvshift-proxykv-cli-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "target");
    const fs::path fixture = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/tiny_llama";
    for (const char* f : {"config.json", "model.safetensors"}) {
      fs::copy_file(fixture / f, dir_ / "target" / f);
    }
    std::ofstream(dir_ / "target/kvzip_prompt.json")
        << R"({"text": "\n\nRepeat the previous context exactly.\n", "ids": [11, 12, 13]})";
    write_token_file(dir_ / "corpus.tokens", 1000, 96);
  }
  void TearDown() override { fs::remove_all(dir_); }
  /// The command with windows of 64 tokens (4 of them unless `windows` says otherwise).
  std::string base(int windows = 4, std::int64_t tokens = 64) const {
    return "proxykv dataset --target " + (dir_ / "target").string() + " --corpus " +
           (dir_ / "corpus.tokens").string() + " --out " + (dir_ / "out").string() +
           " --threads 2 --tokens " + std::to_string(tokens) + " --windows " +
           std::to_string(windows);
  }
  /// Runs `args`, expects exit 2 with `flag` in the message and no output folder.
  void expect_refused(const std::string& args, const std::string& flag) {
    const auto r = run_kvshift(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << "stderr does not name " << flag << ":\n"
                                                   << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << args;
  }
  fs::path dir_;
};

TEST_F(ProxykvCli, WritesTheManifestAndShardsWithWindowsInsideTheSpan) {
  const auto r = run_kvshift(base() + " --proxy-layers 1 --span 0.1:0.9 --seed 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("windows 4/4"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("median per window"), std::string::npos) << r.out;
  const json m = json::parse(slurp((dir_ / "out/manifest.json").string()));
  EXPECT_EQ(m["format"], "kvshift-proxykv-dataset");
  EXPECT_EQ(m["proxy"]["truncated_layers"], 1);
  EXPECT_EQ(m["proxy"]["layers"], 1);
  EXPECT_EQ(m["target"]["layers"], 2);
  EXPECT_EQ(m["in_channels"], 4);
  EXPECT_EQ(m["targets"], 4);
  EXPECT_EQ(m["window_tokens"], 64);
  EXPECT_EQ(m["seed"], 4);
  EXPECT_EQ(m["corpus"]["file"], "corpus.tokens");
  EXPECT_EQ(m["corpus"]["tokens"], 1000);
  EXPECT_EQ(m["corpus"]["span"], json({0.1, 0.9}));
  EXPECT_EQ(m["kvzip_prompt"]["ids"], json({11, 12, 13}));
  ASSERT_EQ(m["shards"].size(), 1u);
  EXPECT_EQ(m["shards"][0]["windows"], 4);
  std::vector<std::int64_t> starts = shard_starts(dir_ / "out/shard-00000.safetensors");
  ASSERT_EQ(starts.size(), 4u);
  std::sort(starts.begin(), starts.end());
  EXPECT_GE(starts.front(), 100);
  EXPECT_LE(starts.back() + 64, 900);
  for (std::size_t i = 1; i < starts.size(); ++i) EXPECT_GE(starts[i], starts[i - 1] + 64);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ / "out")) ++entries;
  EXPECT_EQ(entries, 2u);  // manifest.json + one shard, no staging leftovers
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos);
  }
}

TEST_F(ProxykvCli, ContinuationLabelsKeepEachWindowAndItsContinuationInsideTheSpan) {
  const auto r = run_kvshift(base(6) +
                             " --proxy-layers 1 --span 0.1:0.9 --labels continuation_max "
                             "--continuation 40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("continuation pass"), std::string::npos) << r.out;
  const json m = json::parse(slurp((dir_ / "out/manifest.json").string()));
  EXPECT_EQ(m["labels"], "continuation_max");
  EXPECT_EQ(m["continuation_tokens"], 40);
  EXPECT_EQ(m["window_tokens"], 64);
  std::vector<std::int64_t> starts = shard_starts(dir_ / "out/shard-00000.safetensors");
  ASSERT_EQ(starts.size(), 6u);
  std::sort(starts.begin(), starts.end());
  EXPECT_GE(starts.front(), 100);
  EXPECT_LE(starts.back() + 64 + 40, 900);
  // No window's continuation runs into the next window: the labels never read a window twice.
  for (std::size_t i = 1; i < starts.size(); ++i) EXPECT_GE(starts[i], starts[i - 1] + 104);
}

TEST_F(ProxykvCli, AProxyFolderOfTheSameFamilyIsAccepted) {
  write_proxy(dir_ / "proxy", 96);
  const auto r = run_kvshift(base() + " --proxy " + (dir_ / "proxy").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = json::parse(slurp((dir_ / "out/manifest.json").string()));
  EXPECT_TRUE(m["proxy"]["truncated_layers"].is_null());
  EXPECT_EQ(m["proxy"]["folder"], (dir_ / "proxy").string());
  EXPECT_EQ(m["proxy"]["layers"], 1);
}

TEST_F(ProxykvCli, ExistingOutNeedsForce) {
  fs::create_directories(dir_ / "out");
  std::ofstream(dir_ / "out/keep.txt") << "old";
  const auto r = run_kvshift(base() + " --proxy-layers 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "out/keep.txt"));
  // --force replaces an earlier output folder only, never a folder of other files.
  const auto foreign = run_kvshift(base() + " --proxy-layers 1 --force");
  EXPECT_EQ(foreign.exit_code, 2) << foreign.err;
  EXPECT_NE(foreign.err.find("is not a folder kvshift wrote"), std::string::npos) << foreign.err;
  EXPECT_TRUE(fs::exists(dir_ / "out/keep.txt"));
  std::ofstream(dir_ / "out/manifest.json") << "{}";  // as an earlier dataset left it
  const auto forced = run_kvshift(base() + " --proxy-layers 1 --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(fs::exists(dir_ / "out/keep.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "out/manifest.json"));
}

TEST_F(ProxykvCli, BadInputExitsTwoNamingTheFlag) {
  const std::string corpus = " --corpus " + (dir_ / "corpus.tokens").string();
  const std::string out = " --out " + (dir_ / "out").string();
  expect_refused("proxykv dataset" + corpus + out + " --proxy-layers 1", "--target");
  expect_refused(base() + " --proxy-layers 0", "--proxy-layers");
  expect_refused(base() + " --proxy-layers 2", "--proxy-layers");  // the target has 2 layers
  expect_refused(base(4, 12) + " --proxy-layers 1", "--tokens");
  expect_refused(base(2) + " --proxy-layers 1", "--windows");
  EXPECT_NE(run_kvshift(base(4, 12)).err.find("at least 64 tokens"), std::string::npos);
  EXPECT_NE(run_kvshift(base(2)).err.find("at least 4 windows"), std::string::npos);
  expect_refused(base() + " --proxy-layers 1 --span 0.9:0.1", "--span");
  expect_refused(base(20) + " --proxy-layers 1", "--corpus");  // 20 x 64 > 800 tokens
  expect_refused(base() + " --proxy-layers 1 --seed -3", "--seed");
  expect_refused(base() + " --proxy-layers 1 --features attention_mass", "--features");
  expect_refused(base() + " --proxy-layers 1 --labels continuation", "--labels");
  expect_refused(base() + " --proxy-layers 1 --labels continuation_max --continuation 0",
                 "--continuation");
  expect_refused(base() + " --proxy-layers 1 --continuation 64", "--continuation");  // kvzip_max
  // 8 windows of 64 fit the 800-token span; with 64 continuation tokens each they do not.
  EXPECT_EQ(run_kvshift(base(8) + " --proxy-layers 1 --force").exit_code, 0);
  fs::remove_all(dir_ / "out");
  expect_refused(base(8) + " --proxy-layers 1 --labels continuation_max --continuation 64",
                 "--corpus");
  write_proxy(dir_ / "proxy120", 120);
  expect_refused(base() + " --proxy " + (dir_ / "proxy120").string(), "--proxy");
  const auto r = run_kvshift(base() + " --proxy " + (dir_ / "proxy120").string());
  EXPECT_NE(r.err.find("vocabulary"), std::string::npos) << r.err;
  expect_refused(base() + " --proxy " + (dir_ / "missing").string(), "--proxy");
  expect_refused("proxykv dataset --target " + (dir_ / "target").string() + out +
                     " --proxy-layers 1 --corpus " + (dir_ / "none.tokens").string(),
                 "--corpus");
}

TEST_F(ProxykvCli, AMissingRepeatPromptNamesTheCommandThatWritesIt) {
  fs::remove(dir_ / "target/kvzip_prompt.json");
  const auto r = run_kvshift(base() + " --proxy-layers 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tools/tokenize_prompt.py"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace kvshift::testing
