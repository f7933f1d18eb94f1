// `kvshift quality`: what a KV policy costs in next-token NLL on real text —
// exact (the model's own NLL / PPL), RISK-KV reconstruction from a
// topology.json, and token pruning by SnapKV, H2O, KVZip (the oracle), ProxyKV
// (a trained mapper) and the recent / random floors, at several retention
// ratios. Writes quality.json, quality.md and quality.svg (each atomically)
// when --out is given; prints the headline and the table at ρ = 0.5 always.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_interrupt.hpp"
#include "apps/kvshift/support_progress.hpp"
#include "backend/calibrate/quality.hpp"
#include "backend/calibrate/quality_report.hpp"
#include "backend/kvzip_prompt.hpp"
#include "backend/proxy_dataset.hpp"
#include "backend/safetensors.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/spec_files.hpp"
#include "reports/atomic_file.hpp"

namespace kvshift::app {
namespace {

namespace cal = backend::calibrate;
namespace fs = std::filesystem;

struct QualityCliOptions {
  std::string model, corpus, out, span = "0:1", retention = "0.1,0.2,0.3,0.5,0.7";
  std::string budget = "per-head";
  std::vector<std::string> policies;
  std::string proxy;
  int proxy_layers = 0;
  std::int64_t history = 1024, eval = 128;
  int windows = 32;
  double eps = 0.01;
  std::uint64_t seed = 1;
  int resamples = cal::kMinResamples;
  int threads = 0;
  bool dump_kept = false;
  bool force = false;
  bool out_given = false;  ///< --out was typed (an empty one is refused)
};

backend::ModelWeights load_model(const std::string& folder, const std::string& flag) {
  try {
    return backend::load_hf_model(folder);
  } catch (const InputError& e) {
    throw InputError(flag + ": " + e.what());
  }
}

/// The proxy a mapper was trained with, unless --proxy / --proxy-layers say otherwise.
backend::MapperProxy proxy_for(const QualityCliOptions& o, const input::Json& manifest,
                               const std::string& mapper_path) {
  if (!o.proxy.empty()) return {o.proxy, 0};
  if (o.proxy_layers > 0) return {"", o.proxy_layers};
  return backend::mapper_proxy(manifest, mapper_path);
}

/// Refuses requests inside the span of the same corpus the mapper was trained on.
void check_held_out(const input::Json& manifest, const std::string& mapper_path,
                    const std::string& corpus_path, std::int64_t corpus_tokens,
                    const cal::CorpusSpan& span) {
  if (!manifest.contains("dataset") || !manifest["dataset"].contains("corpus")) return;
  const auto& c = manifest["dataset"]["corpus"];
  const bool same = c.value("file", "") == fs::path(corpus_path).filename().string() &&
                    c.value("tokens", std::int64_t{-1}) == corpus_tokens;
  if (!same || !c.contains("span") || !c["span"].is_array() || c["span"].size() != 2) return;
  const cal::CorpusSpan trained{c["span"][0].get<double>(), c["span"][1].get<double>()};
  if (trained.overlaps(span)) {
    throw InputError("--span: " + cal::span_text(span) + " overlaps the span " +
                     cal::span_text(trained) + " of " + c.value("file", "") + " that " +
                     mapper_path + " was trained on; measure on held-out text (e.g. --span " +
                     cal::span_text({trained.end, 1.0}) + ") or another corpus");
  }
}

/// The budget a mapper was trained to rank for (train_mapper.py --budget; older files:
/// per-head, the only one there was).
std::string mapper_budget(const input::Json& manifest) {
  const auto training = manifest.find("training");
  if (training == manifest.end() || !training->contains("flags")) return "per-head";
  const auto& flags = (*training)["flags"];
  return flags.contains("budget") && flags["budget"].is_string()
             ? flags["budget"].get<std::string>()
             : "per-head";
}

/// kept/<label>-rho<ρ>.safetensors per pruning row: "kept" I32 [requests, layers·KV heads, K]
/// (ascending positions in the history; with --budget global, K is the most any head keeps
/// and -1 pads the heads that keep fewer) and "starts" I64 [requests] (first corpus token).
void write_kept(const cal::QualityResult& r, const fs::path& dir) {
  for (const cal::QualityRow& row : r.rows) {
    if (!row.retention || row.kept.empty()) continue;
    const auto requests = static_cast<std::int64_t>(row.kept.size());
    const auto heads = static_cast<std::int64_t>(row.kept.front().size());
    std::int64_t k = 0;
    for (const auto& request : row.kept) {
      for (const auto& head : request) k = std::max(k, static_cast<std::int64_t>(head.size()));
    }
    backend::RawTensor kept{"kept", "I32", {requests, heads, k}, {}};
    for (const auto& request : row.kept) {
      for (const auto& head : request) {
        for (std::int64_t i = 0; i < k; ++i) {
          const auto v = i < std::ssize(head) ? static_cast<std::int32_t>(head[i]) : -1;
          backend::append_raw(kept.bytes, &v, sizeof v);
        }
      }
    }
    backend::RawTensor starts{"starts", "I64", {requests}, {}};
    for (const std::int64_t s : r.starts) backend::append_raw(starts.bytes, &s, sizeof s);
    char name[64];
    std::snprintf(name, sizeof name, "%s-rho%g.safetensors", row.label.c_str(), *row.retention);
    reports::write_file_atomic(
        dir / name,
        backend::safetensors_image(
            {kept, starts}, {{"format", "kvshift-kept-positions"},
                             {"policy", row.policy},
                             {"history", std::to_string(r.options.history)},
                             {"budget", backend::budget_name(r.options.budget)},
                             {"eval", std::to_string(r.options.eval)},
                             {"rows", "layer*kv_heads + kv_head; positions index the history"}}));
  }
}

/// The quality options the flags give, checked (the model's context included).
cal::QualityOptions quality_options(const QualityCliOptions& o) {
  cal::QualityOptions q;
  q.history = o.history;
  q.eval = o.eval;
  q.windows = o.windows;
  q.span = cal::parse_span(o.span, "--span");
  q.retentions = cal::parse_retentions(o.retention, "--retention");
  q.eps = o.eps;
  q.seed = o.seed;
  q.resamples = o.resamples;
  q.keep_positions = o.dump_kept;
  q.budget = backend::parse_budget(o.budget, "--budget");
  if (o.dump_kept && !o.out_given)
    throw InputError("--dump-kept: needs --out (the folder it writes to)");
  q.threads = o.threads > 0 ? o.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!o.proxy.empty() && o.proxy_layers > 0) {
    throw InputError("--proxy and --proxy-layers: give one of them");
  }
  if (const auto context = input::model_context_tokens(o.model);
      context && q.history + q.eval > *context) {
    throw InputError("--history: " + std::to_string(q.history) + " + --eval " +
                     std::to_string(q.eval) + " tokens exceed the model's context of " +
                     std::to_string(*context) + " tokens (max_position_embeddings of " + o.model +
                     "/config.json)");
  }
  return q;
}

/// What each policy needs loaded (predictors, proxy and mapper, KVZip's prompt), the proxies
/// they share (one per folder and truncation), and what a reader must know of the mappers.
struct LoadedPolicies {
  std::vector<cal::PolicyInputs> inputs;
  std::map<std::pair<std::string, int>, std::unique_ptr<backend::Model>> proxies;
  std::string proxy_name;
  std::vector<std::string> mapper_notes;
};

/// A risk-kv policy's predictors, read beside its topology; they must be its omitted groups.
std::vector<cal::StoredPredictor> risk_kv_predictors(const cal::KvPolicy& p,
                                                     const cost_model::ModelSpec& spec) {
  const cost_model::OmissionPlan topology = input::resolve_topology(p.file, spec);
  const fs::path predictors = fs::path(p.file).parent_path() / "predictors.safetensors";
  std::vector<cal::StoredPredictor> read = cal::read_predictors(predictors.string(), spec);
  std::vector<int> stored, wanted;
  for (const auto& s : read) stored.push_back(s.group);
  for (const auto& g : topology.groups()) wanted.push_back(g.group);
  if (stored != wanted) {
    throw InputError("--policy " + p.text + ": " + predictors.string() +
                     " holds other groups than the topology omits");
  }
  if (!read.empty() && read.front().predictor.sink_rows != topology.sink_rows()) {
    throw InputError("--policy " + p.text + ": the topology sends " +
                     std::to_string(topology.sink_rows()) + " sink row(s) exact, " +
                     predictors.string() + " was fitted for " +
                     std::to_string(read.front().predictor.sink_rows));
  }
  return read;
}

/// A proxykv policy's mapper and the proxy it was trained with (shared in `loaded`).
void load_proxykv(const QualityCliOptions& o, const cal::KvPolicy& p, const backend::Model& target,
                  const cal::QualityOptions& q, std::int64_t corpus_tokens, cal::PolicyInputs& in,
                  LoadedPolicies& loaded) {
  const auto& spec = target.spec();
  const input::Json manifest = backend::read_mapper_manifest(p.file);
  check_held_out(manifest, p.file, o.corpus, corpus_tokens, q.span);
  const std::string trained_for = backend::mapper_target(manifest);
  if (!trained_for.empty() && trained_for != spec.name) {
    throw InputError("--policy " + p.text + ": the mapper was trained for " + trained_for +
                     ", not for --model " + spec.name);
  }
  const backend::MapperProxy c = proxy_for(o, manifest, p.file);
  std::unique_ptr<backend::Model>& proxy = loaded.proxies[{c.folder, c.truncated_layers}];
  if (!proxy) {
    backend::ModelWeights pw = c.folder.empty()
                                   ? backend::truncate_layers(target.weights(), c.truncated_layers)
                                   : load_model(c.folder, "--proxy");
    if (!c.folder.empty()) backend::check_proxy_pair(pw.spec, spec, "--proxy");
    loaded.proxy_name += (loaded.proxy_name.empty() ? "" : ", ") + pw.spec.name;
    proxy = std::make_unique<backend::Model>(std::move(pw));
  }
  in.proxy = proxy.get();
  in.mapper = backend::load_mapper(p.file);
  const std::string trained_budget = mapper_budget(manifest);
  if (trained_budget != backend::budget_name(q.budget)) {
    loaded.mapper_notes.push_back(p.file + " was trained to rank tokens for a " + trained_budget +
                                  " budget and is used with --budget " +
                                  backend::budget_name(q.budget) +
                                  ": its scores were trained for the other selection");
  }
  if (in.mapper->config().features == backend::MapperFeatures::kLogRepeatMax)
    in.kvzip_prompt = backend::kvzip_repeat_prompt(o.model);
}

LoadedPolicies load_policies(const QualityCliOptions& o, const std::vector<cal::KvPolicy>& policies,
                             const backend::Model& target, const cal::QualityOptions& q,
                             std::int64_t corpus_tokens) {
  LoadedPolicies loaded;
  loaded.inputs.resize(policies.size());
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const cal::KvPolicy& p = policies[i];
    if (p.kind == cal::PolicyKind::kKvzip)
      loaded.inputs[i].kvzip_prompt = backend::kvzip_repeat_prompt(o.model);
    if (p.kind == cal::PolicyKind::kRiskKv)
      loaded.inputs[i].predictors = risk_kv_predictors(p, target.spec());
    if (p.kind == cal::PolicyKind::kProxyKv)
      load_proxykv(o, p, target, q, corpus_tokens, loaded.inputs[i], loaded);
  }
  return loaded;
}

/// Each risk-kv row names the topology it measured (its file's digest and omitted groups).
void name_risk_kv_topologies(const std::vector<cal::KvPolicy>& policies,
                             const cost_model::ModelSpec& spec, cal::QualityResult& r) {
  for (cal::QualityRow& row : r.rows) {
    for (const cal::KvPolicy& p : policies) {
      if (p.kind != cal::PolicyKind::kRiskKv || p.text != row.policy) continue;
      row.topology_digest = input::file_digest(p.file);
      const cost_model::OmissionPlan topology = input::resolve_topology(p.file, spec);
      for (const auto& g : topology.groups()) row.omitted_groups.push_back(g.group);
    }
  }
}

void print_quality(const cal::QualityResult& r, const cost_model::ModelSpec& spec,
                   const cal::QualityOptions& q) {
  std::printf(
      "%s: exact NLL %.4f nats/token [%.4f, %.4f], PPL %.3f on %zu requests of %lld + %lld "
      "tokens\n",
      spec.name.c_str(), r.exact_nll, r.exact_ci95_low, r.exact_ci95_high, r.ppl_exact,
      r.starts.size(), static_cast<long long>(q.history), static_cast<long long>(q.eval));
  for (const cal::QualityRow& row : r.rows) {
    if (row.method == "exact") continue;
    std::printf("  %-10s", row.label.c_str());
    if (row.retention) std::printf(" rho %.2f", *row.retention);
    std::printf("  dNLL %+.4f [%+.4f, %+.4f]  PPL %.3f", row.mean, row.ci95_low, row.ci95_high,
                row.ppl);
    if (row.recall) std::printf("  recall@K %.1f %%", 100.0 * *row.recall);
    if (row.kvzip_top_kept) std::printf("  top10 kept %.1f %%", 100.0 * *row.kvzip_top_kept);
    if (row.kvzip_share) std::printf("  KVZip recovered %.1f %%", 100.0 * *row.kvzip_share);
    for (const cal::PairedDifference& d : r.paired) {
      if (d.label != row.label || d.retention != row.retention) continue;
      std::printf("  vs %s %+.4f [%+.4f, %+.4f]", d.leader.c_str(), d.mean, d.ci95_low,
                  d.ci95_high);
    }
    std::printf("\n");
  }
  std::printf("result: %s\n", cal::quality_headline(r).c_str());
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
}

int run_quality_cli(const QualityCliOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.policies.empty()) throw InputError("--policy: give at least one policy (e.g. exact)");
  std::vector<cal::KvPolicy> policies;
  for (const std::string& p : o.policies) policies.push_back(cal::parse_policy(p, "--policy"));
  const cal::QualityOptions q = quality_options(o);
  // An existing --out is refused before the work (as run does); the files are staged whole.
  std::optional<fs::path> tmp;
  if (o.out_given) {
    tmp = reports::staging_folder(o.out, o.force, {o.model, o.corpus});
  }
  std::optional<InterruptCleanup> on_interrupt;
  if (tmp) on_interrupt.emplace(*tmp);
  const std::vector<std::int32_t> tokens = cal::read_tokens(o.corpus);
  const auto corpus_tokens = static_cast<std::int64_t>(tokens.size());
  cal::check_quality_options(q, corpus_tokens);  // before the model loads: fail fast
  backend::ModelWeights weights = load_model(o.model, "--model");
  cal::check_vocabulary(tokens, weights.spec.vocab, o.corpus, o.model);
  const backend::Model target(std::move(weights));
  const auto& spec = target.spec();
  const LoadedPolicies loaded = load_policies(o, policies, target, q, corpus_tokens);

  cal::QualityResult r =
      cal::run_quality(target, tokens, policies, loaded.inputs, q, progress_printer("quality"));
  r.notes.insert(r.notes.end(), loaded.mapper_notes.begin(), loaded.mapper_notes.end());
  name_risk_kv_topologies(policies, spec, r);
  const cal::QualityRunInfo info{
      o.model, o.corpus, corpus_tokens, loaded.proxy_name,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  print_quality(r, spec, q);
  if (tmp) {
    try {
      reports::write_file_atomic(*tmp / "quality.json",
                                 cal::quality_json(r, spec, info).dump(2) + "\n");
      reports::write_file_atomic(*tmp / "quality.md", cal::quality_markdown(r, spec, info));
      reports::write_file_atomic(*tmp / "quality.svg", cal::quality_svg(r, spec));
      if (o.dump_kept) write_kept(r, *tmp / "kept");
      reports::publish_folder(*tmp, o.out);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(*tmp, ec);
      throw;
    }
    std::printf("wrote %s/{quality.json, quality.md, quality.svg%s} in %.1f s\n", o.out.c_str(),
                o.dump_kept ? ", kept/" : "", info.wall_time_s);
  }
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<QualityCliOptions>();
  sub.add_option("--model", o->model, "Hugging Face model folder (the target)")->required();
  sub.add_option("--corpus", o->corpus, "Token file (little-endian int32 ids)")->required();
  sub.add_option("--policy", o->policies,
                 "KV policy (repeatable): exact, risk-kv:TOPOLOGY.json, prune:snapkv, prune:h2o, "
                 "prune:kvzip, prune:proxykv:MAPPER.safetensors, prune:recent, prune:random")
      ->required();
  sub.add_option("--retention", o->retention,
                 "Retention ratios of the pruning policies, in (0, 1]");
  sub.add_option("--history", o->history,
                 "History tokens per request (whose KV the policy changes)");
  sub.add_option("--eval", o->eval, "Teacher-forced eval tokens per request");
  sub.add_option("--windows", o->windows, "Requests (disjoint windows spread over --span)");
  sub.add_option("--span", o->span, "Share of the corpus the requests come from, A:B");
  sub.add_option("--budget", o->budget,
                 "How each ratio's budget is split: per-head (the same number of tokens per KV "
                 "head) or global (one budget over all heads, KVZip's default)");
  sub.add_option("--eps", o->eps, "ΔNLL threshold of the share of requests over ε (nats/token)");
  sub.add_option("--proxy", o->proxy, "ProxyKV proxy model folder (default: mapper.json's)");
  sub.add_option("--proxy-layers", o->proxy_layers,
                 "ProxyKV proxy = the target's first k layers (default: mapper.json's)");
  sub.add_option("--seed", o->seed, "Seed of the random policy and the bootstrap");
  sub.add_option("--resamples", o->resamples, "Bootstrap resamples (>= 2000)");
  sub.add_option("--threads", o->threads, "Requests measured side by side (default: all cores)");
  sub.add_option("--out", o->out,
                 "Output folder for quality.json, quality.md, quality.svg (refused if it "
                 "exists; see --force)")
      ->each([o](const std::string&) { o->out_given = true; });
  sub.add_flag("--force", o->force,
               "Replace an existing --out folder that an earlier quality run wrote (atomically)");
  sub.add_flag("--dump-kept", o->dump_kept,
               "Also write each pruning row's kept positions per layer and KV head to "
               "OUT/kept/<method>-rho<ρ>.safetensors (a method's later policies: <method>-2, …)");
  return [o] { return run_quality_cli(*o); };
}

const RegisterCommand kRegister{
    {"quality", "Measure what a KV policy costs in next-token NLL on real text", 72, setup}};

}  // namespace
}  // namespace kvshift::app
