// `kvshift cost`: the closed-form cost model for one configuration (or the
// paper's three with --paper), as a table or as JSON.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "apps/kvshift/command.hpp"
#include "cost_model/cost_record.hpp"
#include "cost_model/input_error.hpp"
#include "input/spec_files.hpp"
#include "reports/atomic_file.hpp"
#include "reports/cost_report.hpp"

namespace kvshift::app {
namespace {

struct CostOptions {
  std::string model = "qwen2.5-0.5b";
  std::string topology;  // default: "paper" where the paper has one, else "none"
  std::int64_t tokens = 512;
  std::string predictor = "fp32";
  std::int64_t sharing = 1;
  std::string bandwidth, latency, gpu = "h200";
  double retention = 0.3;
  int group_width = 2, anchor_width = 2;
  std::string setup, per_block, prefill_gpu;
  std::int64_t block_tokens = 16;
  std::optional<std::int64_t> held;
  bool json = false, paper = false;
  bool model_given = false;  ///< --model was typed (--paper then conflicts)
  std::string out;
};

nlohmann::json evaluate_one(const CostOptions& o, const std::string& model_name,
                            std::ostream& table) {
  const cost_model::ModelSpec model = input::resolve_costed_model(model_name);
  const cost_model::GpuSpec gpu = input::resolve_gpu(o.gpu);
  std::string topo_text = o.topology;
  if (topo_text.empty()) {
    topo_text = cost_model::paper_omitted_groups(model.name).empty() ? "none" : "paper";
  }
  cost_model::OmissionPlan topo;
  if (topo_text.ends_with(".json")) {
    topo = input::resolve_topology(topo_text, model);
  } else {
    topo = cost_model::OmissionPlan::parse(topo_text, model, {o.group_width, o.anchor_width});
  }
  const cost_model::RooflineCosts compute(gpu);
  cost_model::CostQuery q;
  q.model = &model;
  q.omission = &topo;
  q.gpu = &gpu;
  q.compute = &compute;
  q.tokens = o.tokens;
  q.predictor_dtype = cost_model::parse_dtype(o.predictor, "--predictor");
  q.sharing = o.sharing;
  q.retention = o.retention;
  if (!o.bandwidth.empty()) {
    q.path = cost_model::Path{parse_bandwidth(o.bandwidth, "--bandwidth"),
                              parse_duration(o.latency.empty() ? "0s" : o.latency, "--latency")};
  } else if (!o.latency.empty()) {
    throw InputError("--latency: needs --bandwidth too");
  }
  if (o.block_tokens < 1)
    throw InputError("--block-tokens: must be at least 1 (got " + std::to_string(o.block_tokens) +
                     ")");
  q.engine = {parse_duration(o.setup.empty() ? "0s" : o.setup, "--setup"),
              parse_duration(o.per_block.empty() ? "0s" : o.per_block, "--per-block"),
              o.block_tokens};
  q.held_tokens = o.held;
  std::optional<cost_model::RooflineCosts> prefill;
  if (!o.prefill_gpu.empty()) {
    if (!q.path) throw InputError("--prefill-gpu: needs --bandwidth (the handoff's path)");
    prefill.emplace(input::resolve_gpu(o.prefill_gpu));
    q.prefill_compute = &*prefill;
    q.prefill_gpu = o.prefill_gpu;
  }
  const cost_model::CostRecord record = cost_model::evaluate(q);
  table << reports::cost_table(q, record);
  return reports::cost_json(q, record);
}

int run_cost(const CostOptions& o) {
  std::ostringstream table;
  nlohmann::json result;
  if (o.paper) {
    if (!o.topology.empty())
      throw InputError("--paper: chooses the topology itself; drop --topology");
    if (o.model_given) {
      throw InputError(
          "--paper and --model: --paper evaluates the paper's three models (qwen2.5-0.5b, "
          "qwen2.5-1.5b, tinyllama-1.1b); drop --model, or drop --paper to price " +
          o.model + " alone");
    }
    result = nlohmann::json::array();
    for (const char* m : {"qwen2.5-0.5b", "qwen2.5-1.5b", "tinyllama-1.1b"}) {
      if (!result.empty()) table << "\n";
      result.push_back(evaluate_one(o, m, table));
    }
  } else {
    result = evaluate_one(o, o.model, table);
  }
  if (o.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    std::cout << table.str();
  }
  if (!o.out.empty()) {
    reports::write_file_atomic(o.out, result.dump(2) + "\n");
    std::cout << "\nwrote " << o.out << "\n";
  }
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<CostOptions>();
  sub.add_option("--model", o->model,
                 "Model: a known name (see `kvshift models`), a config.json, or a folder with one "
                 "(not with --paper)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->model_given = true; });
  sub.add_option("--topology", o->topology,
                 "Omitted groups: paper | none | G2,G5 | G2-G5 | topology.json "
                 "(default: paper where the paper has one, else none)");
  sub.add_option("--tokens", o->tokens, "History tokens per request")->capture_default_str();
  sub.add_option("--predictor", o->predictor, "Predictor dtype: fp32 | fp16")
      ->capture_default_str();
  sub.add_option("--sharing", o->sharing, "Requests sharing one predictor copy")
      ->capture_default_str();
  sub.add_option("--bandwidth", o->bandwidth,
                 "Path bottleneck bandwidth, e.g. 100Mbps, 25GB/s (enables latency figures)");
  sub.add_option("--latency", o->latency, "Path one-way latency, e.g. 10ms (default 0s)");
  sub.add_option("--gpu", o->gpu,
                 "Receiving GPU: a preset (h200, h100, a100-80gb, l40s, "
                 "rtx3060-laptop) or a GPU spec JSON")
      ->capture_default_str();
  sub.add_option("--retention", o->retention, "ProxyKV retention ratio rho in (0, 1]")
      ->capture_default_str();
  sub.add_option("--group-width", o->group_width, "Layers per group")->capture_default_str();
  sub.add_option("--anchor-width", o->anchor_width, "Kept layers read on each side of a group")
      ->capture_default_str();
  sub.add_option(
      "--setup", o->setup,
      "Transfer engine: time per KV transfer before its bytes flow, e.g. 3ms (default 0s)");
  sub.add_option(
      "--per-block", o->per_block,
      "Transfer engine: time per descriptor (block x layer x K/V), e.g. 4us (default 0s)");
  sub.add_option("--block-tokens", o->block_tokens, "Paged KV block size in tokens")
      ->capture_default_str();
  sub.add_option("--held", o->held,
                 "prefix_recompute: tokens whose KV a stale replica holds (< --tokens); the rest "
                 "is recomputed on the receiver");
  sub.add_option(
      "--prefill-gpu", o->prefill_gpu,
      "P/D: the prefill GPU (a preset or spec JSON); adds TTFT = prefill there + handoff");
  sub.add_flag("--paper", o->paper,
               "Evaluate the paper's three configurations (Table I); not with --model or "
               "--topology");
  sub.add_flag("--json", o->json, "Print JSON instead of a table");
  sub.add_option("--out", o->out, "Also write the JSON to this file");
  return [o] { return run_cost(*o); };
}

const RegisterCommand kRegister{
    {"cost", "Storage and latency of RISK-KV vs full transfer, replay and ProxyKV (closed form)",
     30, setup}};

}  // namespace
}  // namespace kvshift::app
