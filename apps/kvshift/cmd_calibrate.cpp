// `kvshift calibrate`: RISK-KV on a real model — fits ridge predictors on a
// corpus, orders the groups by NLL risk on one set of requests, gates the
// prefixes on a disjoint one (cross-fitted), chooses a topology for every gate
// and ε of the frontier, measures each choice on held-out test requests and
// writes topology.json, predictors.safetensors, report.json, report.md and
// frontier.svg (atomically, and only after the whole run succeeded).
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <thread>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_interrupt.hpp"
#include "apps/kvshift/support_progress.hpp"
#include "backend/calibrate/calibration.hpp"
#include "backend/calibrate/predictor_file.hpp"
#include "backend/calibrate/report.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/omission_plan.hpp"
#include "input/spec_files.hpp"
#include "reports/atomic_file.hpp"

namespace kvshift::app {
namespace {

namespace cal = backend::calibrate;

struct CalibrateOptions {
  std::string model, corpus, out;
  std::int64_t history = 512, eval = 512;
  std::string requests = "fit:48,order:16,select:32,test:48";
  double eps = 0.002;
  std::string gate = "upper90", predictor_dtype = "fp32", groups;
  std::uint64_t seed = 1;
  int resamples = cal::kMinResamples;
  int threads = 0;
  int group_width = 2, anchor_width = 2, sink_rows = 0;
  std::string order = "risk-per-byte";
  bool force = false;
};

cal::CalibrationOptions procedure_options(const CalibrateOptions& o,
                                          const cost_model::ModelSpec& spec) {
  cal::CalibrationOptions c;
  c.history = o.history;
  c.eval = o.eval;
  c.gate = cal::parse_gate(o.gate, "--gate");
  cal::RequestCounts defaults;
  if (c.gate.gate == cal::Gate::kStableSplit) defaults.confirm = 24;
  c.counts = cal::parse_request_counts(o.requests, defaults, "--requests");
  c.eps = o.eps;
  c.seed = o.seed;
  c.resamples = o.resamples;
  c.threads = o.threads > 0 ? o.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Widths the model leaves no interior group for are told by the procedure, naming --groups.
  for (const auto& [flag, width] :
       {std::pair{"--group-width", o.group_width}, std::pair{"--anchor-width", o.anchor_width}}) {
    if (width < 1 || width > spec.layers) {
      throw InputError(std::string(flag) + ": expected 1 to " + std::to_string(spec.layers) +
                       " layers for the " + std::to_string(spec.layers) + "-layer model (got " +
                       std::to_string(width) + ")");
    }
  }
  c.group_width = o.group_width;
  c.anchor_width = o.anchor_width;
  c.sink_rows = o.sink_rows;  // checked against --history by the procedure
  c.order_rule = cal::parse_order_rule(o.order, "--order");
  if (!o.groups.empty()) {
    const cost_model::OmissionPlan candidates = [&] {
      try {
        return cost_model::OmissionPlan::parse(o.groups, spec, {o.group_width, o.anchor_width});
      } catch (const InputError& e) {  // the parser names --topology; here the flag is --groups
        std::string why = e.what();
        for (std::string_view prefix : {"--topology: ", "topology: "}) {
          if (why.starts_with(prefix)) why.erase(0, prefix.size());
        }
        throw InputError("--groups: " + why);
      }
    }();
    for (const auto& g : candidates.groups()) c.candidates.push_back(g.group);
    if (c.candidates.empty()) throw InputError("--groups: names no group to try");
  }
  return c;
}

/// --history + --eval must fit the model's context (config.json's max_position_embeddings).
void check_context(const std::string& model, std::int64_t history, std::int64_t eval) {
  const std::optional<std::int64_t> context = input::model_context_tokens(model);
  if (context && history + eval > *context) {
    throw InputError("--history: " + std::to_string(history) + " + --eval " + std::to_string(eval) +
                     " tokens exceed the model's context of " + std::to_string(*context) +
                     " tokens (max_position_embeddings of " + model + "/config.json)");
  }
}

int run_calibrate(const CalibrateOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const cost_model::DType dtype = cost_model::parse_dtype(o.predictor_dtype, "--predictor-dtype");
  if (dtype != cost_model::DType::kF32 && dtype != cost_model::DType::kF16) {
    throw InputError("--predictor-dtype: expected fp32 or fp16 (got \"" + o.predictor_dtype +
                     "\")");
  }
  cal::parse_gate(o.gate, "--gate");  // fail fast, before loading the model
  check_context(o.model, o.history, o.eval);
  // An existing --out is refused before the work (as run does); the files are staged whole.
  const std::filesystem::path out(o.out);
  const std::filesystem::path tmp = reports::staging_folder(out, o.force, {o.model, o.corpus});
  const InterruptCleanup on_interrupt(tmp);
  const backend::Model model = [&] {
    try {
      return backend::Model(backend::load_hf_model(o.model));
    } catch (const InputError& e) {
      throw InputError(std::string("--model: ") + e.what());
    }
  }();
  const cal::CalibrationOptions copt = procedure_options(o, model.spec());
  const std::vector<std::int32_t> tokens = cal::read_tokens(o.corpus);
  cal::check_vocabulary(tokens, model.spec().vocab, o.corpus, o.model);
  const cal::CalibrationResult r =
      cal::run_calibration(model, tokens, copt, progress_printer("calibrate"));
  cal::RunInfo info{o.model,
                    o.corpus,
                    static_cast<std::int64_t>(tokens.size()),
                    dtype,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    static_cast<double>(std::clock()) / CLOCKS_PER_SEC};
  const auto& spec = model.spec();
  const std::string predictors = cal::predictors_safetensors(r.predictors, dtype, spec.name);
  const std::string topology = cal::topology_json(r, spec, info).dump(2) + "\n";
  const std::string report = cal::report_json(r, spec, info).dump(2) + "\n";
  const std::string markdown = cal::report_markdown(r, spec, info);
  const std::string chart = cal::frontier_svg(r);
  try {
    reports::write_file_atomic(tmp / "predictors.safetensors", predictors);
    reports::write_file_atomic(tmp / "topology.json", topology);
    reports::write_file_atomic(tmp / "report.json", report);
    reports::write_file_atomic(tmp / "report.md", markdown);
    reports::write_file_atomic(tmp / "frontier.svg", chart);
    reports::publish_folder(tmp, out);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
  const cal::GateChoice& ch = r.chosen();
  const cal::TestQuality& q = ch.test;
  std::printf("%s: %s (%s gate, eps %g, %s)\n", spec.name.c_str(),
              cal::groups_text(q.groups).c_str(), cal::rule_name(ch.rule).c_str(), ch.eps,
              r.cross_fitted ? "cross-fitted" : "in-sample order");
  std::printf(
      "omitted KV %.1f %%; test PPL %.4f -> %.4f; mean dNLL %+.5f [%+.5f, %+.5f], upper-90 "
      "%+.5f; dNLL > eps on %.1f %% of %d requests [%.1f, %.1f]; gate %s on the test set\n",
      100.0 * q.omitted_fraction, q.ppl_exact, q.ppl_reconstructed, q.delta_nll_mean, q.ci95_low,
      q.ci95_high, q.upper90, 100.0 * q.violation_share, q.requests, 100.0 * q.share_ci95_low,
      100.0 * q.share_ci95_high, ch.holds ? "holds" : "does NOT hold");
  std::printf(
      "wrote %s/{topology.json, predictors.safetensors, report.json, report.md, frontier.svg} in "
      "%.1f s\n",
      o.out.c_str(), info.wall_time_s);
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<CalibrateOptions>();
  sub.add_option("--model", o->model, "Hugging Face model folder (config.json, model.safetensors)")
      ->required();
  sub.add_option("--corpus", o->corpus, "Token file (little-endian int32 ids)")->required();
  sub.add_option("--out", o->out, "Output folder (refused if it exists; see --force)")->required();
  sub.add_flag("--force", o->force,
               "Replace an existing --out folder that an earlier calibrate wrote (atomically)");
  sub.add_option("--history", o->history, "History tokens per request (whose KV is rebuilt)");
  sub.add_option("--eval", o->eval, "Teacher-forced eval tokens per request");
  sub.add_option("--requests", o->requests,
                 "Requests per set: fit:N,order:N,select:N,test:N[,confirm:N] (order: ranks the "
                 "groups; select: gates the prefixes; order:0 ranks on select, in-sample)");
  sub.add_option("--eps", o->eps, "ΔNLL budget in nats/token");
  sub.add_option("--gate", o->gate,
                 "Quality gate: upper90, mean, stable-split or share:S (at most a share S of "
                 "requests over eps, 90 % Clopper-Pearson bound)");
  sub.add_option("--predictor-dtype", o->predictor_dtype, "Predictor weights: fp32 or fp16");
  sub.add_option("--groups", o->groups,
                 "Candidate groups, e.g. G2-G14 (default: every interior group)");
  sub.add_option("--group-width", o->group_width,
                 "Layers per group, the unit omitted together (default 2)");
  sub.add_option("--anchor-width", o->anchor_width,
                 "Exact kept layers a group's predictor reads on each side (default 2); a "
                 "candidate group without that many on a side is refused, name --groups then");
  sub.add_option("--sink-rows", o->sink_rows,
                 "First history rows of every omitted layer sent exact instead of rebuilt "
                 "(attention sinks; left out of the fit), default 0");
  sub.add_option("--order", o->order,
                 "How the candidates are ordered on the order set: risk-per-byte (each alone) "
                 "or greedy (each next one measured beside those chosen; two to three times "
                 "the order set's passes)");
  sub.add_option("--seed", o->seed, "Seed for the request split and the bootstrap");
  sub.add_option("--resamples", o->resamples, "Bootstrap resamples (>= 2000)");
  sub.add_option("--threads", o->threads, "Worker threads (default: all cores)");
  return [o] { return run_calibrate(*o); };
}

const RegisterCommand kRegister{
    {"calibrate", "Fit RISK-KV predictors on a real model and choose the topology", 70, setup}};

}  // namespace
}  // namespace kvshift::app
