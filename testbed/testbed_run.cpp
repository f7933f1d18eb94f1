// The testbed run: agents up, moves replayed one at a time, each measured and priced.
#include "testbed/testbed_run.hpp"

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "testbed/agent.hpp"
#include "testbed/cluster_links.hpp"
#include "testbed/continuation.hpp"
#include "testbed/kv_payload.hpp"
#include "testbed/move_setup.hpp"
#include "testbed/probe.hpp"
#include "testbed/receiver_work.hpp"
#include "testbed/testbed_moves.hpp"
#include "util/percentile.hpp"

namespace kvshift::testbed {
namespace {

using cost_model::Strategy;

/// Payloads above this are refused (a move's payload is held in memory twice).
constexpr std::uint64_t kMaxPayload = 1ull << 30;

void check_size(const input::ScenarioSpec& spec) {
  const auto gpus = gpu_names(spec).size();
  if (gpus > static_cast<std::size_t>(kMaxAgents)) {
    throw InputError(spec.source + ": /cluster: " + std::to_string(gpus) +
                     " GPU nodes is too big to run as agents on one machine (the testbed runs at "
                     "most " +
                     std::to_string(kMaxAgents) + ")");
  }
  if (gpus < 2) throw InputError(spec.source + ": /cluster: the testbed needs two GPU nodes");
  if (spec.deployments.size() > 1) {
    throw InputError(spec.source + ": /deployments: the testbed runs one model");
  }
}

/// The request at its source: its KV, the payload a move ships, and (when the continuation is
/// measured) the token it decodes next.
struct Source {
  KvPayload payload;
  backend::KvCache cache;
  std::int32_t next_token = 0;
  std::vector<std::int32_t> following;  ///< the corpus's text after the context (none: random)
};

/// The source's KV for a move: a prefill of its context, and the payload to send.
Source make_source(const PlannedMove& mv, const MoveSetup& s, const input::ScenarioSpec& spec,
                   std::uint64_t seed, int continuation) {
  const backend::Model& model = *s.model;
  Source src;
  const std::vector<std::int32_t> ids =
      context_ids(s, mv.tokens, seed, continuation, src.following);
  if (mv.strategy == Strategy::kTokenReplay) {
    src.payload = token_ids_payload(ids);
    if (continuation == 0) return src;
  }
  src.cache = model.new_cache();
  backend::ForwardOptions fo;
  fo.logits = continuation > 0 ? backend::LogitsMode::kLast : backend::LogitsMode::kNone;
  fo.stats.mass = mv.strategy == Strategy::kProxyKv && !s.mapper;  // H2O's scores
  const backend::ForwardResult r = model.forward(ids, src.cache, fo);
  if (continuation > 0) {  // the source's greedy next token: the first the request decodes
    Eigen::Index best = 0;
    r.logits.row(0).maxCoeff(&best);
    src.next_token = static_cast<std::int32_t>(best);
  }
  if (mv.strategy == Strategy::kProxyKv) {  // scored off the move's critical path
    const backend::Matrix scores = proxykv_scores_of(s, ids, &r);
    src.payload = ship(mv.strategy, spec, s, ids, src.cache, &scores);
  } else if (mv.strategy != Strategy::kTokenReplay) {
    src.payload = ship(mv.strategy, spec, s, ids, src.cache, nullptr);
  }
  return src;
}

/// The cost model's plan and estimate for the same move on the same path (idle GPU queue).
void predict(MoveRow& row, const PlannedMove& mv, const ShapedPath& path,
             const input::ScenarioSpec& spec, const cost_model::ComputeCosts& costs) {
  const cost_model::MoveMethods mm = sim::move_methods(spec);
  cost_model::MoveState st;
  st.context = st.available = mv.tokens;
  st.predictor_at_dst = true;  // the testbed preloads predictors
  const cost_model::MovePlan plan = cost_model::plan_move(mv.strategy, mm, st);
  cost_model::MoveRoute route;
  route.data = cost_model::MoveRoute::Leg::kNetwork;
  route.data_path = {path.bottleneck(),
                     Seconds{std::chrono::duration<double>(path.latency).count()}};
  const cost_model::MoveEstimate e = cost_model::estimate_move(plan, mm, route, 0, costs);
  row.planned_bytes = static_cast<std::uint64_t>((plan.kv + plan.tokens).count);
  row.charged_delta_nll = plan.delta_nll;
  row.predicted_transfer_s = static_cast<double>(e.transfer_ns) * 1e-9;
  row.predicted_compute_s = static_cast<double>(e.compute_ns) * 1e-9;
  row.predicted_total_s = static_cast<double>(e.total_ns()) * 1e-9;
}

/// Shaped rates above this share of the loopback ceiling are not reliable (fidelity.md).
constexpr double kCeilingShare = 0.6;

/// What the receiving agents hand back, by move: guarded by `mu`; `cv` signals each rebuild.
struct MoveInbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, Rebuilt> rebuilt;
  std::map<std::uint64_t, Delivery> delivered;
  std::map<std::uint64_t, RebuildContext> contexts;
};

/// The receiver's work for a delivery, on the receiving agent's compute thread (off its socket
/// thread); its result goes to the inbox.
void rebuild_on(Agent& at, Delivery&& delivered, const std::vector<PlannedMove>& moves,
                MoveInbox& inbox) {
  auto d = std::make_shared<Delivery>(std::move(delivered));
  at.compute([&moves, &inbox, d] {
    RebuildContext ctx;
    {
      std::lock_guard lock(inbox.mu);
      ctx = inbox.contexts.at(d->id);
    }
    Rebuilt r;
    try {
      r = rebuild(moves[d->id].strategy, *d, ctx);
    } catch (const std::exception& e) {
      r.work = std::string("error: ") + e.what();  // reported as the move's failure
    }
    std::lock_guard lock(inbox.mu);
    inbox.rebuilt[d->id] = std::move(r);
    inbox.delivered[d->id] = std::move(*d);
    inbox.cv.notify_all();
  });
}

/// One agent per GPU node on 127.0.0.1, each rebuilding what it receives; `moves` and `inbox`
/// outlive them.
std::map<std::string, std::unique_ptr<Agent>> start_agents(const input::ScenarioSpec& spec,
                                                           const std::vector<PlannedMove>& moves,
                                                           MoveInbox& inbox) {
  std::map<std::string, std::unique_ptr<Agent>> agents;
  for (const std::string& name : gpu_names(spec)) {
    auto self = std::make_shared<Agent*>(nullptr);  // set before any transfer can arrive
    auto agent = std::make_unique<Agent>(name, [&moves, &inbox, self](Delivery&& d) {
      rebuild_on(**self, std::move(d), moves, inbox);
    });
    *self = agent.get();
    agents[name] = std::move(agent);
  }
  return agents;
}

/// A row for move `i` as planned: what it ships where, along which links.
MoveRow planned_row(std::size_t i, const PlannedMove& mv, const ClusterLinks& links) {
  MoveRow row;
  row.move = static_cast<int>(i);
  row.strategy = cost_model::strategy_name(mv.strategy);
  row.src = mv.src;
  row.dst = mv.dst;
  row.tokens = mv.tokens;
  for (const auto& n : links.path_names(mv.src, mv.dst))
    row.path += (row.path.empty() ? "" : " ") + n;
  return row;
}

/// The transfer's outcome and, once delivered, the receiver's work, into the row; with
/// `continuation` steps, what the move did to the request's text (after the timed work).
void record_outcome(MoveRow& row, std::size_t i, const TransferResult& res,
                    const std::vector<std::uint8_t>& sent, MoveInbox& inbox, const Source& src,
                    const backend::Model& model, int continuation, std::uint64_t seed) {
  row.state = res.state == TransferState::kCompleted ? "completed" : "failed";
  row.reason = res.reason;
  row.frames = res.frames_sent;
  row.bytes_resent = res.bytes_resent;
  row.faults = res.drops + res.corruptions + res.disconnects + res.stalls + res.delays;
  row.connections = res.connections;
  if (res.state != TransferState::kCompleted) return;
  std::unique_lock lock(inbox.mu);
  inbox.cv.wait(lock, [&] { return inbox.rebuilt.count(i) > 0; });
  const Delivery& d = inbox.delivered.at(i);
  const Rebuilt& r = inbox.rebuilt.at(i);
  row.transfer_s = std::chrono::duration<double>(d.completed - res.started).count();
  row.decode_s = r.decode_s;
  row.compute_s = r.compute_s;
  row.work = r.work;
  if (r.work.starts_with("error: ")) row.state = "failed", row.reason = r.work;
  row.total_s = row.transfer_s + row.decode_s + row.compute_s;
  if (d.bytes != sent) throw std::logic_error("testbed: delivered bytes differ");
  if (continuation > 0 && row.state == "completed") {
    const ContinuationQuality q = compare_continuations(model, src.cache, r.cache, src.next_token,
                                                        continuation, seed, src.following);
    row.continuation_steps = q.steps;
    row.greedy_agreement = q.greedy_agreement;
    row.sampled_agreement = q.sampled_agreement;
    row.real_delta_nll = q.delta_nll;
    row.text_delta_nll = q.text_delta_nll;
  }
  inbox.delivered.erase(i);
  inbox.rebuilt.erase(i);
}

/// Sends `req` from `from` and waits for its end; a slow move says so every 10 s (faults, a
/// slow path), up to its deadline.
TransferResult send_and_wait(Agent& from, const TransferRequest& req, const std::string& what,
                             const std::function<void(const std::string&)>& progress) {
  std::promise<TransferResult> done;
  auto result = done.get_future();
  from.send(req, [&done](const TransferResult& r) { done.set_value(r); });
  for (int waited = 10; result.wait_for(std::chrono::seconds(10)) != std::future_status::ready;
       waited += 10) {
    if (progress) {
      progress(what + " still sending after " + std::to_string(waited) + " s (gives up after " +
               std::to_string(req.options.deadline.count() / 1000) + " s)");
    }
  }
  return result.get();
}

/// Per strategy, what its moves did to the requests' text (continuation.hpp) beside the ΔNLL
/// the simulator charges: medians over the moves that completed.
void summarise_quality(nlohmann::json& s, const std::vector<MoveRow>& rows, const TestbedOptions& o,
                       const MoveSetup& setup) {
  if (o.continuation <= 0) return;
  std::map<std::string, std::vector<const MoveRow*>> by;
  for (const MoveRow& r : rows) {
    if (r.continuation_steps > 0) by[r.strategy].push_back(&r);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return util::percentile(v, 0.5);
  };
  for (const auto& [strategy, moved] : by) {
    std::vector<double> charged, real, text, greedy, sampled;
    for (const MoveRow* r : moved) {
      charged.push_back(r->charged_delta_nll);
      real.push_back(r->real_delta_nll);
      if (!std::isnan(r->text_delta_nll)) text.push_back(r->text_delta_nll);
      greedy.push_back(r->greedy_agreement);
      sampled.push_back(r->sampled_agreement);
    }
    std::sort(real.begin(), real.end());
    s["quality"][strategy] = {{"moves", moved.size()},
                              {"charged_delta_nll_median", median(charged)},
                              {"real_delta_nll_median", median(real)},
                              {"real_delta_nll_min", real.front()},
                              {"real_delta_nll_max", real.back()},
                              {"greedy_agreement_median", median(greedy)},
                              {"sampled_agreement_median", median(sampled)}};
    if (!text.empty()) s["quality"][strategy]["text_delta_nll_median"] = median(text);
  }
  s["quality_note"] =
      "each move's request decodes " + std::to_string(o.continuation) +
      " tokens on the receiver and on the source from the same next token; real ΔNLL = the "
      "receiver's mean NLL of the source's greedy text minus the source's (nats/token), on " +
      (setup.corpus.empty()
           ? std::string("seeded random contexts (not text: --corpus reads a token file)")
           : "contexts from " + o.inputs.corpus +
                 "; text ΔNLL = the same on the corpus's own text after the context (what "
                 "kvshift quality measures and the simulator charges)") +
      "; ProxyKV's kept tokens: " + setup.proxykv_scores +
      "; charged ΔNLL = the scenario's (ProxyKV's: the mapper and budget its quality file "
      "measured), whatever chose the tokens here; sampled agreement: after one differing token "
      "the two texts run apart, so it falls fast";
}

/// The run's summary: what ran, the loopback ceiling, and each strategy's errors against the
/// simulator's prediction (moves over the ceiling left out).
void summarise(TestbedRun& run, const input::ScenarioSpec& spec,
               const cost_model::ComputeCosts& costs, const TestbedOptions& o,
               const MoveSetup& setup, std::size_t agents, int clipped, double ceiling_bps) {
  nlohmann::json& s = run.summary;
  s["scenario"] = spec.name;
  s["agents"] = agents;
  s["address"] = "127.0.0.1";
  s["moves"] = run.rows.size();
  s["clipped_contexts"] = clipped;
  s["max_tokens"] = o.max_tokens;
  s["faults"] = describe(o.faults);
  s["weights"] = setup.weights_source;
  s["proxykv_scores"] = setup.proxykv_scores;
  if (!setup.predictors_source.empty()) s["predictors"] = setup.predictors_source;
  s["compute_source"] = nlohmann::json::array();
  for (const auto& src : costs.sources()) s["compute_source"].push_back(src.op + ": " + src.source);
  std::map<std::string, std::vector<double>> transfer_err, compute_err, total_err;
  int completed = 0;
  int over_ceiling = 0;
  for (const MoveRow& r : run.rows) {
    if (r.state != "completed") continue;
    ++completed;
    if (!r.note.empty()) {
      ++over_ceiling;
      continue;
    }
    transfer_err[r.strategy].push_back(relative_error(r.transfer_s, r.predicted_transfer_s));
    compute_err[r.strategy].push_back(relative_error(r.compute_s, r.predicted_compute_s));
    total_err[r.strategy].push_back(relative_error(r.total_s, r.predicted_total_s));
  }
  s["completed"] = completed;
  s["loopback_ceiling_gbps"] = ceiling_bps / 1e9;
  s["moves_over_ceiling"] = over_ceiling;
  s["error_note"] = "error figures leave out the moves over " +
                    std::to_string(static_cast<int>(100 * kCeilingShare)) +
                    " % of the loopback ceiling (their testbed.csv note says so)";
  s["failed"] = static_cast<int>(run.rows.size()) - completed;
  summarise_quality(s, run.rows, o, setup);
  for (const auto& [strategy, errs] : total_err) {
    auto stats = [](const std::vector<double>& e) {
      const ErrorStats st = abs_error_stats(e);
      return nlohmann::json{{"n", st.n}, {"median_abs", st.median}, {"p95_abs", st.p95}};
    };
    s["error"][strategy] = {{"transfer", stats(transfer_err[strategy])},
                            {"compute", stats(compute_err[strategy])},
                            {"total", stats(errs)}};
  }
}

}  // namespace

TestbedRun run_testbed(const input::ScenarioSpec& spec, const cost_model::ComputeCosts& costs,
                       const TestbedOptions& o,
                       const std::function<void(const std::string&)>& progress) {
  check_size(spec);
  if (o.moves < 0 || o.moves > 10000) throw InputError("--moves: must be in [1, 10000]");
  if (o.max_tokens < 1) throw InputError("--max-tokens: must be >= 1");
  if (o.continuation < 0 || o.continuation > 4096) {
    throw InputError("--continue: must be in [0, 4096] tokens");
  }
  const ClusterLinks links(spec.cluster);
  const std::vector<PlannedMove> moves =
      choose_moves(spec, links, o.moves, o.max_tokens, o.inputs.seed);
  const MoveSetup setup = load_setup(spec, o.inputs);
  // Loopback cannot be shaped near what it carries: a move over a faster path runs at the
  // loopback's speed, so it is flagged and kept out of the error figures.
  const double ceiling_bps = loopback_ceiling(Bytes{64 << 20}, 2);

  MoveInbox inbox;
  const std::map<std::string, std::unique_ptr<Agent>> agents = start_agents(spec, moves, inbox);
  TestbedRun run;
  int clipped = 0;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const PlannedMove& mv = moves[i];
    clipped += mv.clipped;
    MoveRow row = planned_row(i, mv, links);
    const std::uint64_t seed = o.inputs.seed * 1000003 + i;
    const Source source = make_source(mv, setup, spec, seed, o.continuation);
    const KvPayload& payload = source.payload;
    if (payload.bytes.size() > kMaxPayload) {
      throw InputError("--max-tokens: a move of " + std::to_string(mv.tokens) +
                       " tokens ships over 1 GiB; lower --max-tokens");
    }
    row.bytes = payload.bytes.size();
    const ShapedPath path = links.path(mv.src, mv.dst);
    predict(row, mv, path, spec, costs);
    if (path.bottleneck().value > kCeilingShare * ceiling_bps) {
      row.note = "path " + format_number("%.3g", path.bottleneck().value / 1e9) + " Gbps is over " +
                 format_number("%.0f", 100 * kCeilingShare) + " % of the loopback ceiling (" +
                 format_number("%.3g", ceiling_bps / 1e9) +
                 " Gbps): the transfer ran at loopback speed";
    }
    {
      std::lock_guard lock(inbox.mu);
      inbox.contexts[i] = {setup.model.get(), setup.predictors, mv.tokens};
    }
    TransferRequest req;
    req.id = i;
    req.payload = std::make_shared<std::vector<std::uint8_t>>(payload.bytes);
    req.segments = payload.segments;
    req.port = agents.at(mv.dst)->port();
    req.path = path;
    req.options = send_options(path, o.faults, payload.bytes.size());
    const TransferResult res = send_and_wait(
        *agents.at(mv.src), req,
        "move " + std::to_string(i + 1) + "/" + std::to_string(moves.size()), progress);
    record_outcome(row, i, res, *req.payload, inbox, source, *setup.model, o.continuation, seed);
    if (progress) {
      progress("move " + std::to_string(i + 1) + "/" + std::to_string(moves.size()) + " " +
               row.strategy + " " + row.src + "->" + row.dst + " " + std::to_string(row.tokens) +
               " tokens: " + row.state);
    }
    run.rows.push_back(std::move(row));
  }
  for (auto& [name, agent] : agents) agent->stop();
  summarise(run, spec, costs, o, setup, agents.size(), clipped, ceiling_bps);
  return run;
}

}  // namespace kvshift::testbed
