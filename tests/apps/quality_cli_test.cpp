// `kvshift quality` on the committed tiny model: every policy measured side by side, keeping
// every token changes nothing (exactly), and bad input exits 2 naming the flag.
#include <gtest/gtest.h>

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

/// A per-test folder holding the tiny model (with a KVZip prompt) and a random-token corpus.
struct Workspace {
  fs::path dir, model, corpus;
  explicit Workspace(const std::string& name, std::int64_t corpus_tokens = 4000) {
    dir =
        fs::temp_directory_path() / ("kvshift-quality-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    model = dir / "tiny";
    fs::create_directories(model);
    const fs::path fixture = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/tiny_llama";
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy(fixture / f, model / f);
    // The fixture says a 128-token context; these tests measure up to 128 + 16 tokens.
    json config = json::parse(slurp((model / "config.json").string()));
    config["max_position_embeddings"] = 256;
    std::ofstream(model / "config.json") << config.dump();
    std::ofstream(model / "kvzip_prompt.json") << R"({"text": "repeat", "ids": [5, 6, 7]})";
    corpus = dir / "text.tokens";
    write_token_file(corpus, static_cast<std::size_t>(corpus_tokens), 96);
  }
  ~Workspace() { fs::remove_all(dir); }
  std::string base(const std::string& history = "64") const {
    return "quality --model " + model.string() + " --corpus " + corpus.string() + " --history " +
           history + " --eval 16 --windows 8 --threads 2";
  }
};

/// A kept-positions file (--dump-kept): its safetensors header and the I32 data after it.
struct KeptFile {
  std::string bytes;
  json header;
  std::uint64_t header_bytes = 0;
  explicit KeptFile(const fs::path& path) : bytes(slurp(path.string())) {
    if (bytes.size() < 8) return;
    std::memcpy(&header_bytes, bytes.data(), 8);
    header = json::parse(bytes.substr(8, header_bytes));
  }
  const std::int32_t* kept() const {
    return reinterpret_cast<const std::int32_t*>(bytes.data() + 8 + header_bytes);
  }
};

TEST(QualityCli, MeasuresEveryPolicyAndKeepingEverythingIsExact) {
  const Workspace w("all");
  const CommandResult r = run_kvshift(
      w.base() +
      " --policy exact --policy prune:snapkv --policy prune:h2o --policy prune:kvzip "
      "--policy prune:recent --policy prune:random --retention 0.5,1 --dump-kept --out " +
      (w.dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json q = json::parse(slurp((w.dir / "out/quality.json").string()));
  EXPECT_EQ(q["format"], "kvshift-quality");
  EXPECT_EQ(q["requests"], 8);
  ASSERT_EQ(q["rows"].size(), 11u);  // exact + 5 methods × 2 ratios
  for (const json& row : q["rows"]) {
    if (row["method"] == "exact" || row["retention"] == 1.0) {
      // Keeping every token must reproduce the exact pass bit for bit.
      EXPECT_EQ(row["delta_nll_mean"].get<double>(), 0.0) << row["method"];
      for (const json& d : row["per_request"]) EXPECT_EQ(d.get<double>(), 0.0);
    }
    if (row["method"] == "kvzip") {
      EXPECT_EQ(row["recall_at_k_vs_kvzip"].get<double>(), 1.0);
    }
    if (row["retention"] == 0.5) {
      EXPECT_LT(row["recall_at_k_vs_kvzip"].get<double>(), 1.0 + 1e-12);
      // 63 keys: KVZip's top 10 % is all forced tokens, so there is nothing to count.
      EXPECT_TRUE(row["kvzip_top10_kept"].is_null()) << row["method"];
      EXPECT_GT(row["ppl"].get<double>(), 0.0);
    }
  }
  // At each ratio every row but the leader (the lowest non-KVZip mean) carries its paired
  // difference to the leader.
  for (const double rho : {0.5, 1.0}) {
    const json* leader = nullptr;
    for (const json& row : q["rows"]) {
      if (row["retention"] != rho || row["method"] == "kvzip") continue;
      if (!leader || row["delta_nll_mean"] < (*leader)["delta_nll_mean"]) leader = &row;
    }
    ASSERT_NE(leader, nullptr);
    EXPECT_TRUE((*leader)["paired_vs_leader"].is_null());
    for (const json& row : q["rows"]) {
      if (row["retention"] != rho || &row == leader) continue;
      const json& p = row["paired_vs_leader"];
      ASSERT_TRUE(p.is_object()) << row["label"];
      EXPECT_EQ(p["leader"], (*leader)["label"]);
      EXPECT_NEAR(p["mean"].get<double>(),
                  row["delta_nll_mean"].get<double>() - (*leader)["delta_nll_mean"].get<double>(),
                  1e-15);
      EXPECT_LE(p["ci95"][0].get<double>(), p["ci95"][1].get<double>());
    }
  }
  EXPECT_NE(r.out.find("by a paired 95 % CI"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exact NLL"), std::string::npos) << r.out;
  // The kept positions: 8 requests × (2 layers · 2 KV heads) × K; 63 cached keys, at ρ 0.5 the
  // 36 forced tokens outnumber round(0.5·63), so K = 36; at ρ 1 every key.
  for (const auto& [file, k] : {std::pair{"kvzip-rho0.5", 36}, std::pair{"random-rho1", 63}}) {
    const KeptFile f(w.dir / "out/kept" / (std::string(file) + ".safetensors"));
    ASSERT_GT(f.bytes.size(), 8u) << file;
    EXPECT_EQ(f.header["kept"]["shape"], json({8, 4, k})) << file;
    EXPECT_EQ(f.header["kept"]["dtype"], "I32");
    EXPECT_EQ(f.bytes.size(), 8 + f.header_bytes + 8u * 4 * k * 4 + 8 * 8) << file;
  }
  EXPECT_TRUE(fs::exists(w.dir / "out/quality.md"));
  EXPECT_TRUE(fs::exists(w.dir / "out/quality.svg"));
}

TEST(QualityCli, AGlobalBudgetKeepsItsTotalAndEachHeadItsOwnCount) {
  // 127 cached keys, 2 layers · 2 KV heads: at ρ 0.5 one budget of round(0.5·4·127) = 254
  // tokens over all heads (36 forced per head), any number per head; at ρ 1 every key, exactly.
  const Workspace w("global");
  const CommandResult r = run_kvshift(w.base("128") +
                                      " --policy prune:kvzip --policy prune:h2o --retention 0.5,1 "
                                      "--budget global --dump-kept --out " +
                                      (w.dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json q = json::parse(slurp((w.dir / "out/quality.json").string()));
  EXPECT_EQ(q["budget"], "global");
  ASSERT_EQ(q["rows"].size(), 4u);
  for (const json& row : q["rows"]) {
    if (row["retention"] == 1.0) {
      for (const json& d : row["per_request"]) EXPECT_EQ(d.get<double>(), 0.0) << row["method"];
    }
  }
  EXPECT_NE(slurp((w.dir / "out/quality.md").string()).find("--budget global"), std::string::npos);
  const KeptFile f(w.dir / "out/kept/h2o-rho0.5.safetensors");
  ASSERT_GT(f.bytes.size(), 8u);
  ASSERT_EQ(f.header["kept"]["shape"][0], 8);
  ASSERT_EQ(f.header["kept"]["shape"][1], 4);
  EXPECT_EQ(f.header["__metadata__"]["budget"], "global");
  const int k = f.header["kept"]["shape"][2];
  const std::int32_t* kept = f.kept();
  bool unequal = false;
  for (int req = 0; req < 8; ++req) {
    int total = 0, first = -1;
    for (int head = 0; head < 4; ++head) {
      int count = 0;
      for (int i = 0; i < k; ++i) {
        const std::int32_t t = kept[(req * 4 + head) * k + i];
        if (t == -1) continue;
        ASSERT_TRUE(t >= 0 && t < 127);
        ++count;
      }
      EXPECT_GE(count, 36);
      if (first < 0) first = count;
      unequal = unequal || count != first;
      total += count;
    }
    EXPECT_EQ(total, 254) << "request " << req;
  }
  EXPECT_TRUE(unequal) << "H2O's scores never favoured one head: the budget was not global";
}

TEST(QualityCli, APolicyGivenTwiceGetsItsOwnLabelAndFiles) {
  // Two mappers (here: the random floor twice) in one run: rows, tables and kept files of the
  // second are labelled <method>-2, so neither overwrites the other.
  const Workspace w("twice");
  const CommandResult r =
      run_kvshift(w.base() +
                  " --policy prune:random --policy prune:random --retention 0.5 "
                  "--dump-kept --out " +
                  (w.dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json q = json::parse(slurp((w.dir / "out/quality.json").string()));
  ASSERT_EQ(q["rows"].size(), 2u);
  EXPECT_EQ(q["rows"][0]["label"], "random");
  EXPECT_EQ(q["rows"][1]["label"], "random-2");
  EXPECT_EQ(q["rows"][0]["per_request"], q["rows"][1]["per_request"]);  // same seed, same draw
  EXPECT_TRUE(fs::exists(w.dir / "out/kept/random-rho0.5.safetensors"));
  EXPECT_TRUE(fs::exists(w.dir / "out/kept/random-2-rho0.5.safetensors"));
  const std::string md = slurp((w.dir / "out/quality.md").string());
  EXPECT_NE(md.find("| random-2 |"), std::string::npos);
  // Equal on every request: the headline must not call the first one's lead real.
  EXPECT_EQ(q["rows"][1]["paired_vs_leader"]["ci95"], json({0.0, 0.0}));
  EXPECT_NE(md.find("random loses least of the non-oracle methods (ΔNLL "), std::string::npos);
  EXPECT_NE(md.find("not separated from random-2 by a paired 95 % CI"), std::string::npos) << md;
}

TEST(QualityCli, ExactAloneAnswersThePlainQuestion) {
  const Workspace w("exact");
  const CommandResult r = run_kvshift(w.base() + " --policy exact");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("exact NLL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PPL"), std::string::npos) << r.out;
}

TEST(QualityCli, BadInputExitsTwoNamingTheFlag) {
  const Workspace w("bad");
  const std::pair<std::string, std::string> cases[] = {
      {" --policy prune:snapkv --retention 1.5", "--retention"},
      {" --policy prune:snapkv --retention 0", "--retention"},
      {" --policy exact --eval 4", "--eval"},
      {" --policy exact --windows 2", "--windows"},
      {" --policy exact --span 0.5:0.2", "--span"},
      {" --policy prune:snapkvv", "did you mean \"prune:snapkv\""},
      {" --policy prune:proxykv:" + (w.dir / "none.safetensors").string(), "mapper file not found"},
      {" --policy risk-kv:", "--policy: \"risk-kv:\" needs a topology.json"},
      {" --policy prune:h2o --budget uniform", "--budget: \"uniform\" is not per-head or global"},
  };
  for (const auto& [args, expected] : cases) {
    const CommandResult r = run_kvshift(w.base() + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
  }
  const CommandResult past = run_kvshift(w.base("250") + " --policy exact");
  EXPECT_EQ(past.exit_code, 2);
  EXPECT_NE(past.err.find("--history: 250 + --eval 16 tokens exceed the model's context of 256"),
            std::string::npos)
      << past.err;
  fs::create_directories(w.dir / "run");
  std::ofstream(w.dir / "run" / "summary.json") << "{}";
  const CommandResult exists =
      run_kvshift(w.base() + " --policy exact --out " + (w.dir / "run").string());
  EXPECT_EQ(exists.exit_code, 2);
  EXPECT_NE(exists.err.find("already exists"), std::string::npos) << exists.err;
  EXPECT_FALSE(fs::exists(w.dir / "run" / "quality.json"));
  const CommandResult h = run_kvshift(w.base("12") + " --policy exact");
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_NE(h.err.find("--history: 12 tokens is too short (at least 64"), std::string::npos)
      << h.err;
  const Workspace tiny("short", 12);  // a 12-token corpus is refused, not "passed"
  const CommandResult r = run_kvshift(tiny.base() + " --policy exact");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--corpus"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvshift::testing
