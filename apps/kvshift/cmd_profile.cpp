// `kvshift profile`: times the real operations (prefill, a decode step, RISK-KV
// reconstruction, ProxyKV scoring, pruning, loading the predictors) on the CPU
// or CUDA backend and writes the cost table the simulator's profiled cost
// provider reads (input/cost_table.hpp). With a model folder the ops run
// its real weights, the calibrated predictors (--predictors) and the trained
// mapper (--mapper); with a model name, seeded random weights of its shape,
// and the table says so.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/kvshift/command.hpp"
#include "apps/kvshift/support_cost_table.hpp"
#include "backend/calibrate/profile_inputs.hpp"
#include "backend/profiler.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "input/cost_table.hpp"
#include "input/spec_files.hpp"
#include "reports/atomic_file.hpp"

namespace kvshift::app {
namespace {

struct ProfileOptions {
  std::string backend = "cpu";
  std::string model;
  std::string proxy;
  int proxy_layers = 0;
  std::string mapper;
  std::string predictors;
  std::string tokens = "128,512,2048,8192";
  std::string sharing = "1,4,16";
  std::string decode_batch = "1,4,16";
  std::string decode_context = "256,1024,4096";
  std::string topology;
  double retention = 0.3;
  std::string predictor = "fp32";
  int warmup = 1;
  int repeats = 5;
  std::uint64_t seed = 1;
  std::string out;
};

std::vector<std::int64_t> parse_list(const std::string& text, const std::string& field) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v <= 0 || v > (1LL << 24)) {
      throw InputError(field + ": expected a comma-separated list of positive integers (got \"" +
                       text + "\")");
    }
    out.push_back(v);
  }
  if (out.empty()) throw InputError(field + ": must list at least one value");
  return out;
}

std::unique_ptr<backend::Profiler> make_profiler(const std::string& name) {
  if (name == "cpu") return backend::make_cpu_profiler();
  if (name != "cuda") throw InputError("--backend: must be cpu or cuda (got \"" + name + "\")");
  try {
    return backend::make_cuda_profiler();
  } catch (const std::exception& e) {  // not compiled, or no usable device
    throw InputError(std::string("--backend cuda: ") + e.what());
  }
}

bool has_weights(const std::string& model) {
  namespace fs = std::filesystem;
  return fs::is_directory(model) && (fs::exists(fs::path(model) / "model.safetensors") ||
                                     fs::exists(fs::path(model) / "model.safetensors.index.json"));
}

/// The topology to time: --topology, else the one beside --predictors, else the paper's (or G2,
/// or none for a model too small to omit a group).
std::string topology_for(const ProfileOptions& o, const cost_model::ModelSpec& model) {
  namespace fs = std::filesystem;
  if (!o.topology.empty()) return o.topology;
  if (!o.predictors.empty()) {
    const fs::path beside = fs::path(o.predictors).parent_path() / "topology.json";
    if (!fs::exists(beside)) {
      throw InputError("--topology: give the topology the predictors were calibrated for (no " +
                       beside.string() + " beside --predictors)");
    }
    return beside.string();
  }
  const int groups = (model.layers + 1) / 2;
  return !cost_model::paper_omitted_groups(model.name).empty() ? "paper"
         : groups >= 3                                         ? "G2"
                                                               : "none";
}

/// A model folder with weights: the real predictors, proxy and mapper; an op whose real inputs
/// are missing is left out (and added to `untimed`), never timed on random ones.
void load_real_inputs(const ProfileOptions& o, backend::ProfileRequest& req,
                      std::vector<std::string>& untimed) {
  backend::calibrate::ProfilePaths paths;
  paths.model = o.model;
  paths.proxy = has_weights(o.proxy) ? o.proxy : "";
  paths.proxy_layers = o.proxy_layers;
  paths.predictors = o.predictors;
  paths.mapper = o.mapper;
  req.inputs = backend::calibrate::load_profile_inputs(paths, req.omission);
  // Real weights are never mixed with random ones: an op whose real inputs are missing is
  // left out of the table (and said so).
  if (!req.inputs.predictors && !req.omission.empty()) {
    untimed.push_back(
        "reconstruct, predictor_load: not timed (give --predictors: the calibrated "
        "predictors.safetensors)");
    req.omission = cost_model::OmissionPlan{};
  }
  if (!req.inputs.mapper && (req.inputs.proxy || !o.proxy.empty())) {
    untimed.push_back("proxy_score: not timed (give --mapper: a trained mapper.safetensors)");
  }
  if (req.inputs.proxy && req.inputs.mapper) req.proxy = req.inputs.proxy->spec;
  if (!o.proxy.empty() && paths.proxy.empty() && req.inputs.mapper) {
    // A config without weights names the proxy (as a scenario does); the weights are the
    // mapper's proxy, which must have its shape.
    const cost_model::ModelSpec named = input::resolve_costed_model(o.proxy);
    if (!req.proxy) {
      throw InputError("--proxy: " + o.proxy +
                       " holds no weights; with a real --model give "
                       "--mapper (its proxy has them), --proxy-layers, or a proxy folder");
    }
    if ((req.proxy->layers != named.layers || req.proxy->hidden != named.hidden ||
         req.proxy->q_heads != named.q_heads)) {
      throw InputError("--proxy: " + o.proxy + " has " + std::to_string(named.layers) +
                       " layers; the proxy the mapper was trained with, " + req.proxy->name +
                       ", has " + std::to_string(req.proxy->layers));
    }
    req.proxy = named;
  }
}

/// A model name or config: its shape with seeded random weights, and the proxy's shape.
void load_shapes(const ProfileOptions& o, backend::ProfileRequest& req) {
  if (!o.proxy.empty()) req.proxy = input::resolve_costed_model(o.proxy);
  // The shape of the target's first k layers, seeded random weights like the target's.
  if (o.proxy_layers > 0) req.proxy = backend::truncated_spec(req.model, o.proxy_layers);
  if (!o.mapper.empty()) {
    req.inputs.mapper =
        std::make_shared<const backend::HybridAxialMapper>(backend::load_mapper(o.mapper));
    req.inputs.mapper_origin = {o.mapper, backend::calibrate::digest_path(o.mapper)};
    req.inputs.mapper_weights = backend::shared_weights(req.inputs.mapper);
    if (req.proxy) {  // before any timing: the file names the mismatch
      backend::check_mapper_fits(req.inputs.mapper->config(),
                                 req.proxy->layers * req.proxy->q_heads,
                                 req.model.layers * req.model.kv_heads, "--mapper " + o.mapper);
    }
  }
}

/// The request `o` asks for; what will not be timed is added to `untimed` (printed only once
/// every option has been checked, so an error is never preceded by it).
backend::ProfileRequest make_request(const ProfileOptions& o, std::vector<std::string>& untimed) {
  backend::ProfileRequest req;
  req.model = input::resolve_costed_model(o.model);
  const bool real = has_weights(o.model);
  if (!real) {
    if (!o.predictors.empty()) {
      throw InputError("--predictors: needs --model to be a folder with weights (got \"" + o.model +
                       "\", a model without weights)");
    }
  }
  if (!o.proxy.empty() && o.proxy_layers > 0) {
    throw InputError("--proxy and --proxy-layers: give one of them");
  }
  if (!o.mapper.empty() && o.proxy.empty() && o.proxy_layers == 0 && !real) {
    throw InputError(
        "--mapper: needs --proxy or --proxy-layers (the model whose features the mapper reads)");
  }
  const std::string topo = topology_for(o, req.model);
  req.omission = topo.ends_with(".json") ? input::resolve_topology(topo, req.model)
                                         : cost_model::OmissionPlan::parse(topo, req.model);
  if (real) {
    load_real_inputs(o, req, untimed);
  } else {
    load_shapes(o, req);
  }
  req.tokens = parse_list(o.tokens, "--tokens");
  req.sharing = parse_list(o.sharing, "--sharing");
  req.decode_batches = parse_list(o.decode_batch, "--decode-batch");
  req.decode_contexts = parse_list(o.decode_context, "--decode-context");
  if (!(o.retention > 0 && o.retention <= 1)) throw InputError("--retention: must be in (0, 1]");
  req.retention = o.retention;
  req.predictor_dtype = cost_model::parse_dtype(o.predictor, "--predictor");
  if (o.warmup < 0) throw InputError("--warmup: must be >= 0");
  if (o.repeats < 1) throw InputError("--repeats: must be >= 1");
  req.warmup = o.warmup;
  req.repeats = o.repeats;
  req.seed = o.seed;
  return req;
}

int run_profile(const ProfileOptions& o) {
  reports::check_output_file(o.out, "--out");  // before any measurement
  std::vector<std::string> untimed;
  const backend::ProfileRequest req = make_request(o, untimed);
  auto profiler = make_profiler(o.backend);
  for (const std::string& line : untimed) std::printf("%s\n", line.c_str());
  const bool real = static_cast<bool>(req.inputs.target);
  std::printf("weights: %s\n", real ? "real" : "seeded random");
  std::printf("%-15s %8s %8s %6s %12s %12s %12s\n", "op", "tokens", "sharing", "batch", "median ms",
              "p10 ms", "p90 ms");
  const std::vector<backend::OpTiming> rows = profiler->run(req);
  for (const auto& t : rows) {
    std::printf("%-15s %8lld %8lld %6lld %12.3f %12.3f %12.3f\n", t.op.c_str(), (long long)t.tokens,
                (long long)t.sharing, (long long)t.batch, t.median_s * 1e3, t.p10_s * 1e3,
                t.p90_s * 1e3);
  }
  const input::CostTable table = measured_table(*profiler, req, rows);
  for (const auto& [op, note] : table.notes)
    std::printf("%s on %s: %s\n", op.c_str(), table.backend.c_str(), note.c_str());
  // Round-trip through the strict reader so we never write a table we could not read.
  const input::Json json = input::cost_table_json(table);
  input::parse_cost_table(json, "profile result");
  reports::write_file_atomic(o.out, json.dump(2) + "\n");
  std::printf("wrote %s (%zu entries, %s)\n", o.out.c_str(), table.entries.size(),
              table.machine.cpu.c_str());
  return 0;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<ProfileOptions>();
  sub.add_option("--backend", o->backend, "cpu | cuda")->capture_default_str();
  sub.add_option("--model", o->model,
                 "Model: a folder with weights (the real model is timed), or a known name or "
                 "config.json (seeded random weights of its shape)")
      ->required();
  sub.add_option("--proxy", o->proxy,
                 "ProxyKV proxy: a folder with weights, or a name (enables proxy_score; default "
                 "with a real --model and --mapper: the proxy the mapper was trained with)");
  sub.add_option("--proxy-layers", o->proxy_layers,
                 "The target's first k layers as the proxy (with a model without weights: "
                 "that shape, seeded random weights)")
      ->check(CLI::Range(1, 100000));
  sub.add_option("--mapper", o->mapper,
                 "Trained ProxyKV mapper (mapper.safetensors) timed in proxy_score (default: "
                 "seeded random weights of the same shape)");
  sub.add_option("--predictors", o->predictors,
                 "Calibrated RISK-KV predictors (predictors.safetensors) timed in reconstruct "
                 "and predictor_load (needs a real --model; --topology defaults to the "
                 "topology.json beside them)");
  sub.add_option("--tokens", o->tokens, "Token counts, comma-separated")->capture_default_str();
  sub.add_option("--sharing", o->sharing, "Requests sharing a predictor, comma-separated")
      ->capture_default_str();
  sub.add_option("--decode-batch", o->decode_batch, "Decode-step batch sizes, comma-separated")
      ->capture_default_str();
  sub.add_option("--decode-context", o->decode_context,
                 "Decode-step context tokens per request, comma-separated")
      ->capture_default_str();
  sub.add_option("--topology", o->topology,
                 "Reconstructed groups: paper | G2,G5 | G2-G5 | topology.json "
                 "(default: paper where the paper has one, else G2, or none below 3 groups)");
  sub.add_option("--retention", o->retention, "ProxyKV keep ratio for prune")
      ->capture_default_str();
  sub.add_option("--predictor", o->predictor, "Predictor dtype: fp32 | fp16")
      ->capture_default_str();
  sub.add_option("--warmup", o->warmup, "Untimed runs per shape")->capture_default_str();
  sub.add_option("--repeats", o->repeats, "Timed runs per shape")->capture_default_str();
  sub.add_option("--seed", o->seed, "Seed of the random weights and inputs")->capture_default_str();
  sub.add_option("--out", o->out, "Cost table JSON to write")->required();
  return [o] { return run_profile(*o); };
}

const RegisterCommand kRegister{
    {"profile",
     "Measure prefill, decode, reconstruction, proxy scoring and pruning; write a cost table", 60,
     setup}};

}  // namespace
}  // namespace kvshift::app
