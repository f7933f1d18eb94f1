// Property tests of the serving model over random scenarios (seeded, 8 shards of
// 250): small clusters with node failures and repairs, link failures and
// degradations, drains and rebalancing, under every strategy and protection
// mode. Whatever happens, the books must balance:
//   - every request ends exactly once: completed, failed with a reason, or
//     unfinished at the end with what it was doing;
//   - every move ends in exactly one outcome, inside the run, never before it began;
//   - the bytes a finished move shipped are its plan's bytes;
//   - no move lands on a node that is draining or down;
//   - the predictors are shipped to a node at most once while it keeps them;
//   - GPU busy time never exceeds duration x GPUs;
//   - with prefill and decode pools (a third of the scenarios, with a transfer engine and path
//     stalls and failures): a request is handed off at most once, from a prefill node to a
//     decode node, and decodes on a decode node; no node ever has more KV moves in flight
//     into it than its transfer-slot cap.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "reports/run_answer.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

using nlohmann::json;
constexpr int kShards = 8;
constexpr int kScenariosPerShard = 250;

template <class T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

std::string seconds(double s) { return std::to_string(s) + "s"; }

json random_scenario(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int gpus = std::uniform_int_distribution<int>(2, 6)(rng);
  const bool store = rng() % 2 == 0;
  const double duration = uniform(rng, 4, 15);
  json nodes = json::array({{{"name", "sw"}, {"kind", "switch"}}});
  json links = json::array();
  for (int i = 0; i < gpus; ++i) {
    nodes.push_back({{"name", "gpu" + std::to_string(i)},
                     {"hbm", pick(rng, std::vector<std::string>{"3.5GiB", "5GiB", "12GiB"})}});
    links.push_back(
        {{"a", "gpu" + std::to_string(i)},
         {"b", "sw"},
         {"bandwidth", pick(rng, std::vector<std::string>{"100Mbps", "1Gbps", "25Gbps"})},
         {"latency", pick(rng, std::vector<std::string>{"50us", "2ms"})}});
  }
  if (rng() % 2)
    links.push_back({{"a", "gpu0"}, {"b", "gpu1"}, {"bandwidth", "10Gbps"}, {"latency", "1ms"}});
  if (store) {
    nodes.push_back({{"name", "store"}, {"kind", "storage"}, {"capacity", "1TiB"}});
    links.push_back({{"a", "store"}, {"b", "sw"}, {"bandwidth", "10Gbps"}, {"latency", "100us"}});
  }
  json events = json::array();
  const int n_events = std::uniform_int_distribution<int>(0, 6)(rng);
  for (int e = 0; e < n_events; ++e) {
    const std::string node =
        "gpu" + std::to_string(std::uniform_int_distribution<int>(0, gpus - 1)(rng));
    const std::string link = node + "-sw";
    const double at = uniform(rng, 0.2, duration);
    switch (rng() % 5) {
      case 0:
        events.push_back({{"type", "node_failure"},
                          {"at", seconds(at)},
                          {"node", node},
                          {"detection_delay", pick(rng, std::vector<std::string>{"0s", "200ms"})}});
        if (rng() % 2) events.back()["repair_after"] = seconds(uniform(rng, 0.5, 5));
        break;
      case 1:
        events.push_back({{"type", "drain"}, {"at", seconds(at)}, {"node", node}});
        break;
      case 2:
        events.push_back({{"type", "link_failure"}, {"at", seconds(at)}, {"link", link}});
        if (rng() % 2) events.back()["repair_after"] = seconds(uniform(rng, 0.5, 5));
        break;
      case 3:
        events.push_back({{"type", "link_degrade"},
                          {"at", seconds(at)},
                          {"link", link},
                          {"bandwidth", "20Mbps"},
                          {"repair_after", seconds(uniform(rng, 0.5, 5))}});
        break;
      default:
        events.push_back({{"type", "node_failure"},
                          {"at", seconds(at)},
                          {"node", node},
                          {"detection_delay", "0s"}});
        break;
    }
  }
  std::vector<std::string> modes = {"none", "full", "risk_kv", "proxy_kv"};
  std::vector<std::string> placements = {"next_node", "least_loaded"};
  if (store) placements.push_back("storage");
  json protection = {{"mode", pick(rng, modes)}};
  if (protection["mode"] != "none") {
    protection["stream_every_tokens"] = pick(rng, std::vector<int>{16, 64, 256});
    protection["placement"] = pick(rng, placements);
    if (protection["placement"] == "storage") protection["store"] = "store";
  }
  json predictors = {{"placement", "preloaded"}};
  if (rng() % 2) {
    predictors = {{"placement", "on_demand"}, {"source", store ? "store" : "gpu0"}};
  }
  json pools, engine;
  if (gpus >= 3 && rng() % 3 == 0) {
    // gpu0..gpu(k-1) prefill, the rest decode; engine costs and path faults between the two.
    const int k = std::uniform_int_distribution<int>(1, gpus - 2)(rng);
    json prefill = json::array(), decode = json::array();
    for (int i = 0; i < gpus; ++i) (i < k ? prefill : decode).push_back("gpu" + std::to_string(i));
    const std::vector<std::string> routers = {"least_loaded", "kv_aware", "round_robin"};
    pools = json::array({{{"name", "prefill"},
                          {"role", "prefill"},
                          {"nodes", prefill},
                          {"router", pick(rng, routers)}},
                         {{"name", "decode"},
                          {"role", "decode"},
                          {"nodes", decode},
                          {"router", pick(rng, routers)}}});
    engine = {{"setup", pick(rng, std::vector<std::string>{"0s", "3ms"})},
              {"per_block", pick(rng, std::vector<std::string>{"0s", "4us"})},
              {"max_inflight_per_destination", pick(rng, std::vector<int>{0, 1, 2})}};
    if (rng() % 2) engine["stall_timeout"] = "300ms";
    for (int f = std::uniform_int_distribution<int>(0, 2)(rng); f > 0; --f) {
      events.push_back({{"type", rng() % 2 ? "path_stall" : "path_failure"},
                        {"at", seconds(uniform(rng, 0.1, duration))},
                        {"from", pick(rng, prefill.get<std::vector<std::string>>())},
                        {"to", pick(rng, decode.get<std::vector<std::string>>())},
                        {"repair_after", seconds(uniform(rng, 0.2, 3))}});
    }
  }
  json policies = {{"strategies",
                    {"full_kv", "token_replay", "risk_kv", "proxy_kv", "prefix_recompute", "hybrid",
                     "adaptive"}}};
  if (rng() % 3 == 0) policies["rebalance"] = {{"threshold", 0.5}, {"check_interval", "500ms"}};
  if (rng() % 3 == 0) policies["quality_budget"] = 0.005;
  json out = {
      {"name", "random-" + std::to_string(seed)},
      {"model", "qwen2.5-1.5b"},
      {"gpu", "rtx3060-laptop"},
      {"cluster", {{"nodes", nodes}, {"links", links}}},
      {"workload",
       {{"arrival", "poisson"},
        {"rate", uniform(rng, 2, 30)},
        {"max_requests", std::uniform_int_distribution<int>(5, 60)(rng)},
        {"prompt_tokens", {{"distribution", "uniform"}, {"min", 32}, {"max", 3000}}},
        {"output_tokens", {{"distribution", "uniform"}, {"min", 8}, {"max", 600}}}}},
      {"serving", {{"max_batch", pick(rng, std::vector<int>{1, 8, 32})}}},
      {"protection", protection},
      {"events", events},
      {"policies", policies},
      {"risk_kv", {{"topology", "paper"}, {"delta_nll", 0.003}}},
      {"proxy_kv", {{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.4}, {"delta_nll", 0.004}}},
      {"predictors", predictors},
      {"seed", seed},
      {"duration", seconds(duration)}};
  if (!pools.is_null()) {
    out["pools"] = pools;
    out["transfer_engine"] = engine;
  }
  // Drawn last, so the draws above (and the scenarios they made) stay as they were: two
  // GPUs a node, single-GPU failures, replicas in the node's own DRAM, DRAM too small for all.
  if (rng() % 3 == 0) {
    for (json& n : out["cluster"]["nodes"]) {
      if (!n.contains("kind")) n["gpus"] = 2;
    }
  }
  for (int f = std::uniform_int_distribution<int>(0, 2)(rng); f > 0; --f) {
    json e = {
        {"type", "gpu_failure"},
        {"at", seconds(uniform(rng, 0.2, duration))},
        {"node", "gpu" + std::to_string(std::uniform_int_distribution<int>(0, gpus - 1)(rng))},
        {"detection_delay", pick(rng, std::vector<std::string>{"0s", "200ms"})}};
    if (rng() % 2) e["repair_after"] = seconds(uniform(rng, 0.5, 5));
    out["events"].push_back(e);
  }
  if (protection["mode"] != "none" && rng() % 4 == 0) {
    out["protection"]["placement"] = "local";
    out["protection"].erase("store");
  }
  if (rng() % 4 == 0) {
    for (json& n : out["cluster"]["nodes"]) {
      if (!n.contains("kind")) n["host_memory"] = "256MiB";
    }
  }
  if (rng() % 3 == 0)
    out["serving"]["prefill_chunk_tokens"] = pick(rng, std::vector<int>{1, 256, 1000});
  return out;
}

// With pools: handoffs go prefill -> decode at most once per request, requests decode in a
// decode pool, and no node has more KV moves in its transfer slots than the cap.
void check_pools(const input::ScenarioSpec& spec, const RunResult& run, const std::string& label) {
  if (!disaggregated(spec)) return;
  std::map<std::string, PoolRole> role;
  for (const ClusterNode& n : spec.cluster.nodes) {
    if (n.kind == NodeKind::kGpu) role[n.name] = spec.pools.at(n.pool).role;
  }
  std::map<std::uint64_t, int> landed;
  // Per destination: (time, +1 slot taken / -1 released); releases first at equal times.
  std::map<std::string, std::vector<std::pair<std::int64_t, int>>> slots;
  for (const MoveRecord& mv : run.moves) {
    const std::string what = label + ": move of request " + std::to_string(mv.request);
    if (mv.trigger == MoveTrigger::kHandoff) {
      if (mv.from.empty()) {  // the handoff failed: a decode-side prefill from the token ids
        EXPECT_TRUE(mv.strategy.empty() || mv.strategy == "token_replay") << what;
      } else {
        EXPECT_EQ(role[mv.from], PoolRole::kPrefill) << what << " from " << mv.from;
      }
      if (!mv.to.empty()) {
        EXPECT_EQ(role[mv.to], PoolRole::kDecode) << what;
      }
      if (mv.outcome == MoveOutcome::kDone) {
        EXPECT_EQ(++landed[mv.request], 1) << what << ": handed off twice";
      }
    }
    if (mv.strategy.empty() || mv.to.empty()) continue;  // waited for room, never planned
    // A slot is held until the bytes (and predictors) are in: transfer_ns once they are; a
    // move with nothing to receive frees it at once; one cut off in transfer, at its end.
    const bool recomputes_all = mv.strategy == "hybrid" && mv.available_tokens == 0;
    const bool receives = (!mv.source.empty() && !recomputes_all) || mv.strategy == "risk_kv";
    const std::int64_t released =
        mv.transfer_ns > 0 || mv.outcome == MoveOutcome::kDone || !receives
            ? mv.start_ns + mv.transfer_ns
            : mv.end_ns;
    slots[mv.to].emplace_back(mv.start_ns, +1);
    slots[mv.to].emplace_back(released, -1);
  }
  for (const RequestRecord& r : run.requests) {
    if (r.outcome == RequestOutcome::kCompleted && run.strategy != "token_replay") {
      EXPECT_EQ(role[r.first_node], PoolRole::kPrefill) << label << ": request " << r.id;
    }
    if (r.outcome == RequestOutcome::kCompleted) {
      EXPECT_EQ(role[r.final_node], PoolRole::kDecode) << label << ": request " << r.id;
    }
  }
  const int cap = spec.transfer_engine.max_inflight_per_destination;
  if (cap <= 0) return;
  for (auto& [node, changes] : slots) {
    std::sort(changes.begin(), changes.end());
    int held = 0;
    for (const auto& [t, delta] : changes) {
      held += delta;
      ASSERT_LE(held, cap) << label << ": " << node << " has " << held << " KV moves in flight at "
                           << t << " ns, over its cap";
    }
  }
}

// Spans during which a node is draining or down: [from, to).
std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> closed_spans(
    const input::ScenarioSpec& spec) {
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> spans;
  const std::int64_t never = std::numeric_limits<std::int64_t>::max();
  std::map<std::string, std::vector<std::int64_t>> repairs;
  for (const EventSpec& e : spec.events) {
    if (e.kind == EventKind::kNodeFailure && e.repair_after) {
      repairs[e.node].push_back(from_seconds(e.at).ns + from_seconds(*e.repair_after).ns);
    }
  }
  for (const EventSpec& e : spec.events) {
    if (e.kind != EventKind::kNodeFailure && e.kind != EventKind::kDrain) continue;
    const std::int64_t at = from_seconds(e.at).ns;
    std::int64_t until = never;  // a repair (of any failure) reopens the node
    for (std::int64_t r : repairs[e.node]) {
      if (r > at) until = std::min(until, r);
    }
    spans[e.node].emplace_back(at, until);
  }
  return spans;
}

const std::vector<std::pair<std::int64_t, std::int64_t>> kNoSpans;

void check_run(const input::ScenarioSpec& spec, const RunResult& run, const std::string& label) {
  const std::int64_t end = from_seconds(spec.duration).ns;
  std::set<std::uint64_t> ids;
  for (const RequestRecord& r : run.requests) {
    ASSERT_TRUE(ids.insert(r.id).second) << label << ": request " << r.id << " twice";
    switch (r.outcome) {
      case RequestOutcome::kCompleted:
        EXPECT_GE(r.first_token_ns, r.arrival_ns) << label;
        EXPECT_GE(r.finish_ns, r.first_token_ns) << label;
        EXPECT_LE(r.finish_ns, end) << label;
        break;
      case RequestOutcome::kFailed:
      case RequestOutcome::kUnfinished:
        EXPECT_FALSE(r.reason.empty())
            << label << ": request " << r.id << " ended without a reason";
        break;
    }
  }
  ASSERT_EQ(ids.size(), run.requests.size());
  const auto spans = closed_spans(spec);
  const auto& m = spec.model;
  std::map<std::string, std::vector<std::int64_t>> shipped;  // node -> predictor fetch times
  for (const MoveRecord& mv : run.moves) {
    const std::string what = label + ": move of request " + std::to_string(mv.request);
    EXPECT_TRUE(ids.count(mv.request)) << what;
    EXPECT_GE(mv.end_ns, mv.start_ns) << what;
    EXPECT_LE(mv.end_ns, end) << what;
    if (mv.outcome != MoveOutcome::kDone) continue;
    EXPECT_FALSE(mv.strategy.empty()) << what;
    const std::int64_t avail = mv.available_tokens;
    std::int64_t kv = 0;
    if (mv.strategy == "full_kv" || mv.strategy == "prefix_recompute" || mv.strategy == "hybrid")
      kv = cost_model::kv_bytes(m, avail).count;
    if (mv.strategy != "token_replay") {  // every token is shipped, recomputed first, or after
      EXPECT_EQ(mv.cached_tokens + mv.front_tokens + avail + mv.tail_tokens, mv.context_tokens)
          << what;
    }
    EXPECT_TRUE(mv.front_tokens == 0 || mv.strategy == "hybrid") << what;
    EXPECT_TRUE(mv.strategy != "full_kv" || mv.tail_tokens == 0) << what << ": full means all";
    if (mv.strategy == "risk_kv")
      kv = cost_model::storage(m, spec.risk_kv->omission, avail, {}).kv_kept.count;
    if (mv.strategy == "proxy_kv") {
      kv = std::llround(spec.proxy_kv->retention *
                        static_cast<double>(cost_model::kv_bytes(m, avail).count));
    }
    EXPECT_EQ(mv.kv_bytes, mv.source.empty() ? 0 : kv) << what << " (" << mv.strategy << ")";
    // The receiver recomputes the front and the tail (all of it, for a replay): their ids
    // travel from the source; only a replay from the router's ids ships none.
    EXPECT_EQ(mv.token_bytes, mv.source.empty() ? 0 : 4 * (mv.front_tokens + mv.tail_tokens))
        << what;
    if (mv.requested != "adaptive" && mv.requested != mv.strategy) {
      EXPECT_FALSE(mv.fallback.empty()) << what << ": a fallback without a reason";
    }
    if (mv.requested != "adaptive" && mv.fallback.empty()) {
      EXPECT_EQ(mv.strategy, mv.requested) << what;
    }
    if (mv.delta_nll > 0) {
      EXPECT_TRUE(mv.strategy == "risk_kv" || mv.strategy == "proxy_kv") << what;
    }
    if (spec.policies.quality_budget) {
      EXPECT_LE(mv.delta_nll, *spec.policies.quality_budget) << what;
    }
    const auto closed = spans.find(mv.to);
    for (const auto& [from, to] : closed == spans.end() ? kNoSpans : closed->second) {
      EXPECT_FALSE(mv.end_ns >= from && mv.end_ns < to)
          << what << " landed on " << mv.to << " while it was draining or down";
      EXPECT_FALSE(mv.start_ns > from && mv.start_ns < to) << what << " planned onto a closed node";
    }
    if (mv.predictor_bytes > 0) shipped[mv.to].push_back(mv.start_ns);
  }
  // A node keeps the predictors until it fails: a second shipment needs a failure between.
  for (auto& [node, times] : shipped) {
    std::sort(times.begin(), times.end());
    for (std::size_t i = 1; i < times.size(); ++i) {
      bool failed_between = false;
      for (const EventSpec& e : spec.events) {
        const std::int64_t at = from_seconds(e.at).ns;
        if (e.kind == EventKind::kNodeFailure && e.node == node && at >= times[i - 1] &&
            at <= times[i]) {
          failed_between = true;
        }
      }
      EXPECT_TRUE(failed_between) << label << ": predictors shipped to " << node << " twice";
    }
  }
  const GpuTime& g = run.gpu_time;
  const std::int64_t busy = g.prefill + g.decode + g.reconstruct + g.replay + g.proxy_scoring;
  EXPECT_LE(busy, end * run.gpus) << label << ": GPU busy time over duration x GPUs";
}

// Every counter of the summary is the count (or sum) of its rows in requests.csv and
// recoveries.csv, whatever became of the moves; and a move that recomputes tokens from a
// source on another node never ships nothing.
void check_counters(const RunResult& run, const std::string& label) {
  RunTally rows;
  BytesByKind bytes;
  std::int64_t uses = 0;
  for (const RequestRecord& r : run.requests) rows.add(r);
  for (const MoveRecord& mv : run.moves) {
    rows.add(mv);
    bytes.kv += mv.kv_bytes;
    bytes.tokens += mv.token_bytes;
    bytes.predictors += mv.predictor_bytes;
    uses += mv.outcome == MoveOutcome::kDone && mv.strategy == "risk_kv";
    const bool remote = !mv.source.empty() && mv.source != mv.to;
    if (mv.outcome == MoveOutcome::kDone && remote && mv.front_tokens + mv.tail_tokens > 0) {
      const std::string what = label + ": move of request " + std::to_string(mv.request);
      EXPECT_GT(mv.token_bytes, 0) << what << " recomputed tokens whose ids never travelled";
      EXPECT_GT(mv.transfer_ns, 0) << what << " crossed the network in no time";
    }
  }
  std::int64_t fallbacks = 0, failed = 0;
  for (const MoveRecord& mv : run.moves) fallbacks += !mv.fallback.empty();
  for (const RequestRecord& r : run.requests) failed += r.outcome == RequestOutcome::kFailed;
  EXPECT_EQ(run.tally.failed, failed) << label << ": failed requests against the rows";
  EXPECT_EQ(run.tally.arrived, static_cast<std::int64_t>(run.requests.size())) << label;
  EXPECT_EQ(run.tally.fallbacks, fallbacks) << label << ": fallbacks against the rows";
  EXPECT_EQ(run.tally.failed_moves, rows.failed_moves) << label;
  EXPECT_EQ(run.tally.cancelled_moves, rows.cancelled_moves) << label;
  EXPECT_EQ(run.tally.recoveries + run.tally.migrations + run.tally.handoffs,
            rows.recoveries + rows.migrations + rows.handoffs)
      << label;
  EXPECT_EQ(run.tally.open_recoveries + run.tally.open_migrations + run.tally.open_handoffs,
            rows.open_recoveries + rows.open_migrations + rows.open_handoffs)
      << label;
  EXPECT_EQ(run.bytes.kv, bytes.kv) << label << ": bytes.kv against the rows";
  EXPECT_EQ(run.bytes.tokens, bytes.tokens) << label << ": bytes.tokens against the rows";
  EXPECT_EQ(run.bytes.predictors, bytes.predictors) << label << ": bytes.predictors";
  std::int64_t counted_uses = 0;
  for (const auto& [node, n] : run.predictor_uses) counted_uses += n;
  EXPECT_EQ(counted_uses, uses) << label << ": predictor uses are done RISK-KV rebuilds";
}

// The run's verdict never puts ahead a strategy that failed more requests, or left more
// moves unfinished, than another of the same run.
void check_verdict(const input::ScenarioSpec& spec, const std::vector<RunResult>& runs,
                   const cost_model::ComputeCosts& compute, const std::string& label) {
  const std::vector<reports::NamedMetrics> all =
      reports::strategies_from_json(reports::run_summary(spec, runs, compute.sources()));
  const reports::RunAnswer answer = reports::run_answer(all);
  for (const std::string& name : answer.ahead) {
    const auto ahead = std::find_if(
        all.begin(), all.end(), [&](const reports::NamedMetrics& n) { return n.strategy == name; });
    ASSERT_NE(ahead, all.end()) << label << ": " << name;
    for (const reports::NamedMetrics& other : all) {
      EXPECT_LE(ahead->metrics.requests.failed, other.metrics.requests.failed)
          << label << ": " << answer.text;
      EXPECT_LE(ahead->metrics.moves.unfinished, other.metrics.moves.unfinished)
          << label << ": " << answer.text;
    }
  }
}

class ServingProperties : public ::testing::TestWithParam<int> {};

TEST_P(ServingProperties, BooksBalanceOnRandomScenarios) {
  std::map<MoveOutcome, int> outcomes;
  std::set<std::string> executed;
  int handoffs = 0;
  for (int i = 0; i < kScenariosPerShard; ++i) {
    const std::uint64_t seed =
        1000 + static_cast<std::uint64_t>(GetParam() * kScenariosPerShard + i);
    const json doc = random_scenario(seed);
    const input::ScenarioSpec spec = input::load_scenario_text(doc.dump(), "random");
    const cost_model::RooflineCosts compute(spec.gpu);
    std::vector<RunResult> runs;
    try {
      runs = run_scenario(spec, compute, {false, {}});
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": " << e.what() << "\nscenario: " << doc.dump();
    }
    check_verdict(spec, runs, compute, "seed " + std::to_string(seed));
    for (const RunResult& run : runs) {
      check_run(spec, run, "seed " + std::to_string(seed) + " " + run.strategy);
      check_pools(spec, run, "seed " + std::to_string(seed) + " " + run.strategy);
      check_counters(run, "seed " + std::to_string(seed) + " " + run.strategy);
      for (const MoveRecord& m : run.moves) {
        ++outcomes[m.outcome];
        executed.insert(m.strategy);
        handoffs += m.trigger == MoveTrigger::kHandoff;
      }
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "scenario: " << doc.dump();
      return;
    }
  }
  // The shard exercised what it claims to: moves of every outcome, every strategy executed.
  for (MoveOutcome o : {MoveOutcome::kDone, MoveOutcome::kFailed, MoveOutcome::kCancelled,
                        MoveOutcome::kUnfinished}) {
    EXPECT_GT(outcomes[o], 0) << move_outcome_name(o);
  }
  for (const char* s :
       {"full_kv", "token_replay", "risk_kv", "proxy_kv", "prefix_recompute", "hybrid"}) {
    EXPECT_TRUE(executed.count(s)) << s;
  }
  EXPECT_GT(handoffs, 0) << "the shard ran no P/D handoff";
  std::printf("shard %d: %d done, %d failed, %d cancelled, %d unfinished moves\n", GetParam(),
              outcomes[MoveOutcome::kDone], outcomes[MoveOutcome::kFailed],
              outcomes[MoveOutcome::kCancelled], outcomes[MoveOutcome::kUnfinished]);
}

INSTANTIATE_TEST_SUITE_P(Shards, ServingProperties, ::testing::Range(0, kShards));

}  // namespace
}  // namespace kvshift::sim
