// `kvshift replay` as a user runs it: three node processes on loopback serve a
// small scenario for real (seeded random weights of a small Llama shape, so CI
// needs no real model), with a drain and a node failure (a killed process);
// every request and every move ends exactly once, token replay rebuilds the KV
// exactly, no node process outlives the run, and bad input exits 2 naming the
// field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/testing/run_command.hpp"
#include "util/csv.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) { return scratch_dir("replay", name); }

/// A small Llama shape (7 M parameters): a decode step takes a few milliseconds, so
/// requests of 600-1,200 tokens are decoding when the events come.
constexpr const char* kConfig = R"({"hidden_size": 256, "intermediate_size": 768,
  "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 8,
  "vocab_size": 1024, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})";

/// ProxyKV's proxy: the same shape with 2 layers (only its spec is read: the scores are H2O's).
constexpr const char* kProxy = R"({"hidden_size": 256, "intermediate_size": 768,
  "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
  "vocab_size": 1024, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})";

std::string scenario(const fs::path& config, int nodes, const std::string& extra = "") {
  std::ostringstream s;
  s << R"({"name": "replay-ci", "model": ")" << config.string() << R"(", "gpu": "h200",
    "cluster": {"node": {"gpus": 1}, "star": {"nodes": )"
    << nodes << R"(, "bandwidth": "200Mbps", "latency": "1ms"}},
    "workload": {"arrival": "poisson", "rate": 6,
                 "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 96},
                 "output_tokens": {"distribution": "uniform", "min": 600, "max": 1200}},
    "serving": {"max_batch": 4},
    "events": [{"type": "drain", "at": "1.5s", "node": "gpu0"},
               {"type": "node_failure", "at": "2.5s", "node": "gpu1",
                "detection_delay": "100ms", "repair_after": "500ms"}],
    "policies": {"strategies": ["full_kv", "token_replay", "risk_kv", "proxy_kv", "hybrid"]},
    "risk_kv": {"topology": "G2", "delta_nll": 0.01},
    "proxy_kv": {"proxy_model": ")"
    << (config.parent_path() / "proxy.json").string()
    << R"(", "retention": 0.5, "delta_nll": 0.02},)" << extra << R"("seed": 3, "duration": "4s"})";
  return s.str();
}

using Table = std::vector<std::map<std::string, std::string>>;

Table read_table(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> header, cells;
  util::read_csv_record(in, header);
  Table rows;
  while (util::read_csv_record(in, cells)) {
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

/// Processes whose command line names `marker` (the node processes are forks of kvshift,
/// so they carry its command line).
int processes_naming(const std::string& marker) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp((e.path() / "cmdline").string());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    n += cmdline.find(marker) != std::string::npos && cmdline.find("kvshift") != std::string::npos;
  }
  return n;
}

TEST(ReplayCli, ServesTheScenarioWithEveryStrategyAndEveryMoveEndsOnce) {
  const fs::path dir = scratch("serve");
  std::ofstream(dir / "config.json") << kConfig;
  std::ofstream(dir / "proxy.json") << kProxy;
  std::ofstream(dir / "s.json") << scenario(dir / "config.json", 3);
  const fs::path out = dir / "out";
  const auto r =
      run_kvshift("replay " + (dir / "s.json").string() + " --continue 8 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(processes_naming(out.string()), 0) << "a node process outlived the run";

  const Table requests = read_table(out / "requests.csv");
  const Table moves = read_table(out / "recoveries.csv");
  const std::set<std::string> strategies{"full_kv", "token_replay", "risk_kv", "proxy_kv",
                                         "hybrid"};
  std::map<std::string, std::set<std::string>> ids;
  for (const auto& q : requests) {
    ASSERT_TRUE(strategies.count(q.at("strategy"))) << q.at("strategy");
    EXPECT_TRUE(ids[q.at("strategy")].insert(q.at("id")).second) << "request twice";
    const std::string outcome = q.at("outcome");
    ASSERT_TRUE(outcome == "completed" || outcome == "unfinished") << outcome;
    if (outcome == "completed") {
      EXPECT_GE(std::stod(q.at("first_token_s")), std::stod(q.at("arrival_s")));
      EXPECT_GE(std::stod(q.at("finish_s")), std::stod(q.at("first_token_s")));
    }
  }
  ASSERT_EQ(ids.size(), 5u);
  // The same trace for every strategy: the simulator's workload stream.
  for (const auto& [s, set] : ids) EXPECT_EQ(set, ids.begin()->second) << s;

  std::map<std::string, int> drains, recoveries;
  for (const auto& m : moves) {
    const std::string run = m.at("strategy_run");
    const std::string outcome = m.at("outcome");
    ASSERT_TRUE(outcome == "done" || outcome == "failed" || outcome == "cancelled" ||
                outcome == "unfinished")
        << outcome;
    EXPECT_GE(std::stod(m.at("end_s")), std::stod(m.at("start_s")));
    EXPECT_TRUE(ids[run].count(m.at("request"))) << "a move of an unknown request";
    if (outcome != "done") continue;
    if (m.at("trigger") == "drain") {
      ++drains[run];
      EXPECT_EQ(m.at("from"), "gpu0");
      EXPECT_EQ(m.at("strategy"), run);
      if (run == "hybrid") {  // the front's ids and the rest's KV, split by the cost model
        EXPECT_GT(std::stoll(m.at("kv_bytes")) + std::stoll(m.at("token_bytes")), 0);
        EXPECT_EQ(std::stoll(m.at("shipped_tokens")) + std::stoll(m.at("front_tokens")),
                  std::stoll(m.at("context_tokens")));
        EXPECT_EQ(std::stoll(m.at("token_bytes")), 4 * std::stoll(m.at("front_tokens")));
      } else if (run != "token_replay") {
        EXPECT_GT(std::stoll(m.at("kv_bytes")), 0) << run;
      }
      // What the simulator leaves out, measured at the source: the wait and the packing.
      EXPECT_NE(m.at("note").find("waiting for the step in flight"), std::string::npos)
          << m.at("note");
    }
    if (m.at("trigger") == "failure") {
      ++recoveries[run];
      EXPECT_EQ(m.at("from"), "gpu1");
      EXPECT_EQ(m.at("strategy"), "token_replay");  // the KV died with the node
      EXPECT_GE(std::stod(m.at("start_s")), 2.6);   // once the loss is detected
      EXPECT_GE(std::stod(m.at("stall_s")), std::stod(m.at("latency_s")) + 0.1);
    }
  }
  for (const std::string& s : strategies) {
    EXPECT_GT(drains[s], 0) << s << ": no drain move ran\n"
                            << slurp((out / "recoveries.csv").string());
    EXPECT_GT(recoveries[s], 0) << s << ": no failure recovery ran";
  }
  // Token replay rebuilds exactly the KV a prefill of the same tokens makes: the same text.
  const Table quality = read_table(out / "quality.csv");
  int replayed = 0;
  for (const auto& q : quality) {
    EXPECT_EQ(q.at("continuation_tokens"), "8");
    if (q.at("executed") == "token_replay") {
      ++replayed;
      EXPECT_EQ(std::stod(q.at("real_delta_nll")), 0.0);
      EXPECT_EQ(std::stod(q.at("greedy_agreement")), 1.0);
    }
    if (q.at("executed") == "full_kv" || q.at("executed") == "hybrid") {
      EXPECT_LT(std::abs(std::stod(q.at("real_delta_nll"))), 1e-2);  // fp16 on the wire
    }
  }
  EXPECT_GT(replayed, 0);
  const Table fidelity = read_table(out / "fidelity.csv");
  std::map<std::string, std::set<std::string>> metrics;
  for (const auto& row : fidelity) metrics[row.at("strategy")].insert(row.at("metric"));
  ASSERT_EQ(metrics.size(), 5u);
  for (const auto& [s, names] : metrics) {
    for (const char* m : {"ttft_p50", "ttft_p99", "e2e_p99", "move_p50", "delta_nll"}) {
      EXPECT_TRUE(names.count(m)) << s << " has no " << m;
    }
    // Its failure recoveries ran as token replay: a group of their own.
    if (s != "token_replay") {
      EXPECT_TRUE(names.count("move_p50[token_replay]")) << s;
    }
  }
  const auto summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  EXPECT_EQ(summary["address"], "127.0.0.1");
  EXPECT_NE(summary["weights"].get<std::string>().find("seeded random"), std::string::npos);
  EXPECT_EQ(summary["ranking"].size(), 2u);
  fs::remove_all(dir);
}

void expect_input_error(const std::string& args, const std::string& part) {
  const auto r = run_kvshift(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
}

TEST(ReplayCli, BadInputNamesTheFieldAndExitsTwo) {
  const fs::path dir = scratch("bad");
  std::ofstream(dir / "config.json") << kConfig;
  std::ofstream(dir / "proxy.json") << kProxy;
  std::ofstream(dir / "s.json") << scenario(dir / "config.json", 3);
  std::ofstream(dir / "big.json") << scenario(dir / "config.json", 5);
  std::ofstream(dir / "replicas.json")
      << scenario(dir / "config.json", 3, R"("protection": {"mode": "full"},)");
  const std::string s = (dir / "s.json").string(), out = " --out " + (dir / "o").string();
  expect_input_error("replay " + (dir / "big.json").string() + out, "/cluster");
  expect_input_error("replay " + (dir / "replicas.json").string() + out, "/protection/mode");
  expect_input_error("replay " + s + " --strategies adaptive" + out, "--strategies");
  expect_input_error("replay " + s + " --strategies prefix_recompute" + out, "--strategies");
  expect_input_error("replay " + s + " --strategies warp" + out, "--strategies");
  expect_input_error("replay " + s + " --continue -1" + out, "--continue");
  fs::create_directories(dir / "exists" / "x");
  expect_input_error("replay " + s + " --out " + (dir / "exists").string(), "--out");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshift::testing
