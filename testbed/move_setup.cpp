// Loading what real moves run on, and the payload each strategy ships.
#include "testbed/move_setup.hpp"

#include <algorithm>
#include <chrono>
#include <random>

#include "backend/calibrate/corpus.hpp"
#include "backend/calibrate/predictor_file.hpp"
#include "backend/kvzip_prompt.hpp"
#include "backend/proxy_dataset.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/pruning.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::testbed {
namespace {

using cost_model::Strategy;

/// Weights above this (fp32) are refused: the CPU backend would take minutes per prefill.
constexpr double kMaxWeightBytes = 4.0 * (1ull << 30);
/// --mapper's mapper and the proxy it was trained with (a folder, or the target's first layers).
void load_mapper_setup(MoveSetup& s, const ModelInputs& o, const std::string& model_dir) {
  const nlohmann::json manifest = backend::read_mapper_manifest(o.mapper);
  const std::string trained_for = backend::mapper_target(manifest);
  if (!trained_for.empty() && trained_for != s.model->spec().name) {
    throw InputError("--mapper: " + o.mapper + " was trained for " + trained_for + ", not for " +
                     s.model->spec().name);
  }
  const backend::MapperProxy p = backend::mapper_proxy(manifest, o.mapper);
  backend::ModelWeights pw = p.folder.empty()
                                 ? backend::truncate_layers(s.model->weights(), p.truncated_layers)
                                 : backend::load_hf_model(p.folder);
  if (!p.folder.empty()) backend::check_proxy_pair(pw.spec, s.model->spec(), "--mapper's proxy");
  const std::string proxy_name = pw.spec.name;
  s.proxy = std::make_unique<backend::Model>(std::move(pw));
  s.mapper = std::make_unique<backend::HybridAxialMapper>(backend::load_mapper(o.mapper));
  if (s.mapper->config().features == backend::MapperFeatures::kLogRepeatMax) {
    s.repeat_prompt = backend::kvzip_repeat_prompt(model_dir);
  }
  s.proxykv_scores = "the mapper " + o.mapper + " on its proxy " + proxy_name +
                     " (top-K per KV head, whatever budget it was trained for)";
}

/// ProxyKV's keep policy: the scenario's ρ, the default sinks and recent window.
backend::KeepPolicy keep_of(const input::ScenarioSpec& spec) {
  backend::KeepPolicy keep;
  keep.retention = spec.proxy_kv->retention;
  return keep;
}

}  // namespace

std::vector<std::string> gpu_names(const input::ScenarioSpec& spec) {
  std::vector<std::string> names;
  for (const auto& n : spec.cluster.nodes) {
    if (n.kind == sim::NodeKind::kGpu) names.push_back(n.name);
  }
  return names;
}

MoveSetup load_setup(const input::ScenarioSpec& spec, const ModelInputs& o) {
  MoveSetup s;
  const std::string dir = !o.model_dir.empty() ? o.model_dir : spec.cost_source.live.model;
  if (!dir.empty()) {
    s.model = std::make_unique<backend::Model>(backend::load_hf_model(dir));
    if (s.model->spec().layers != spec.model.layers ||
        s.model->spec().kv_width() != spec.model.kv_width()) {
      throw InputError("--model-dir: " + dir + " is not the scenario's model " + spec.model.name);
    }
    s.weights_source = dir;
  } else {
    if (4.0 * static_cast<double>(spec.model.parameter_count()) > kMaxWeightBytes) {
      throw InputError(spec.source + ": /model: " + spec.model.name +
                       " is too big for seeded random weights on the CPU backend (over 4 GiB)");
    }
    s.model = std::make_unique<backend::Model>(backend::random_weights(spec.model, o.seed));
    s.weights_source = "seeded random weights of " + spec.model.name + "'s shape (no model folder)";
  }
  if (!o.mapper.empty()) load_mapper_setup(s, o, dir);
  if (!o.corpus.empty()) {
    s.corpus = backend::calibrate::read_tokens(o.corpus);
    backend::calibrate::check_vocabulary(s.corpus, s.model->spec().vocab, o.corpus, dir);
  }
  if (!spec.risk_kv || spec.risk_kv->omission.empty()) return s;
  const cost_model::OmissionPlan& topo = spec.risk_kv->omission;
  if (topo.sink_rows() > 0) {  // its wire format carries whole layers only
    throw InputError("risk_kv.topology: sink_rows " + std::to_string(topo.sink_rows()) +
                     ": the testbed sends whole layers and cannot send an omitted layer's sink "
                     "rows yet; use a topology calibrated without --sink-rows");
  }
  const std::string file = !o.predictors.empty() ? o.predictors : spec.cost_source.live.predictors;
  if (file.empty()) {
    for (const auto& g : topo.groups()) {
      s.predictors.push_back(backend::random_predictor(s.model->spec(), g, o.seed + 7));
    }
    s.predictors_source = "seeded random predictors (no --predictors)";
    return s;
  }
  const auto stored = backend::calibrate::read_predictors(file, s.model->spec());
  for (const auto& g : topo.groups()) {
    auto it = std::find_if(stored.begin(), stored.end(),
                           [&](const auto& p) { return p.group == g.group; });
    if (it == stored.end()) {
      throw InputError("--predictors: " + file + " has no predictor for G" +
                       std::to_string(g.group) + " of the topology " + topo.describe());
    }
    if (it->predictor.sink_rows != 0) {
      throw InputError("--predictors: " + file + " was fitted with sink_rows " +
                       std::to_string(it->predictor.sink_rows) +
                       "; the testbed sends whole layers only");
    }
    s.predictors.push_back(it->predictor);
  }
  s.predictors_source = file;
  return s;
}

WireDType wire_dtype(const cost_model::ModelSpec& m) {
  return m.kv_dtype == cost_model::DType::kF32 ? WireDType::kF32 : WireDType::kF16;
}

backend::Matrix proxykv_scores_of(const MoveSetup& s, std::span<const std::int32_t> ids,
                                  const backend::ForwardResult* prefill) {
  if (s.mapper) return backend::proxykv_scores(*s.proxy, *s.mapper, ids, s.repeat_prompt);
  const cost_model::ModelSpec& m = s.model->spec();
  if (prefill != nullptr) return backend::h2o_scores(prefill->stats, m);
  backend::KvCache scratch = s.model->new_cache();
  backend::ForwardOptions o;
  o.logits = backend::LogitsMode::kNone;
  o.stats.mass = true;
  return backend::h2o_scores(s.model->forward(ids, scratch, o).stats, m);
}

KvPayload ship(Strategy strategy, const input::ScenarioSpec& spec, const MoveSetup& s,
               std::span<const std::int32_t> ids, const backend::KvCache& cache,
               const backend::Matrix* scores) {
  const cost_model::ModelSpec& m = s.model->spec();
  if (strategy == Strategy::kProxyKv) {
    const backend::Matrix scored = scores ? *scores : proxykv_scores_of(s, ids, nullptr);
    return kept_tokens_payload(cache, backend::top_k_per_head(scored, keep_of(spec)), m.kv_heads,
                               m.head_dim, wire_dtype(m));
  }
  std::vector<int> layers;
  for (int l = 0; l < m.layers; ++l) {
    bool omitted = false;
    if (strategy == Strategy::kRiskKv) {
      for (const auto& g : spec.risk_kv->omission.groups()) {
        omitted |=
            std::find(g.target_layers.begin(), g.target_layers.end(), l) != g.target_layers.end();
      }
    }
    if (!omitted) layers.push_back(l);
  }
  return layers_payload(cache, layers, wire_dtype(m));
}

std::vector<std::int32_t> context_ids(const MoveSetup& s, std::int64_t tokens, std::uint64_t seed,
                                      std::int64_t following, std::vector<std::int32_t>& after) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
  if (s.corpus.empty()) {
    const auto vocab = static_cast<std::uint64_t>(s.model->spec().vocab);
    for (auto& t : ids) t = static_cast<std::int32_t>(rng() % vocab);
    return ids;
  }
  const auto window = static_cast<std::size_t>(tokens + following);
  if (s.corpus.size() < window) {
    throw InputError("--corpus: " + std::to_string(s.corpus.size()) + " tokens, fewer than a " +
                     std::to_string(tokens) + "-token context and the " +
                     std::to_string(following) + " after it (lower --max-tokens)");
  }
  const auto offset = static_cast<std::ptrdiff_t>(rng() % (s.corpus.size() - window + 1));
  std::copy_n(s.corpus.begin() + offset, ids.size(), ids.begin());
  after.assign(s.corpus.begin() + offset + static_cast<std::ptrdiff_t>(tokens),
               s.corpus.begin() + offset + static_cast<std::ptrdiff_t>(window));
  return ids;
}

SendOptions send_options(const ShapedPath& path, const FaultSpec& faults,
                         std::size_t bytes_to_send) {
  SendOptions o;
  // A frame of about 250 us at the bottleneck: fine-grained sharing, few timer wake-ups.
  const double bytes = path.bottleneck().value / 8.0 * 250e-6;
  o.frame_payload = static_cast<std::uint32_t>(std::clamp(bytes, 8192.0, 1048576.0));
  o.window = std::max<std::uint64_t>(
      16u << 20,
      static_cast<std::uint64_t>(path.bottleneck().value / 8.0 *
                                 std::chrono::duration<double>(path.latency).count() * 2));
  // A move gives up in bounded time: 30 s plus 20x its unfaulted transfer (the faults allowed
  // lose at most 3 frames in 4), at most 10 minutes; the row then says failed and why.
  const double ideal_s = std::chrono::duration<double>(path.latency).count() +
                         8.0 * static_cast<double>(bytes_to_send) / path.bottleneck().value;
  o.deadline = std::chrono::milliseconds(
      static_cast<std::int64_t>(1000 * std::min(600.0, 30.0 + 20.0 * ideal_s)));
  o.faults = faults;
  return o;
}

}  // namespace kvshift::testbed
