// Cost sources for the simulator (ARCHITECTURE.md, "Cost sources"):
//   analytic  the roofline estimate of the scenario's GPU spec;
//   profile   a cost table measured by `kvshift profile`, the roofline behind
//             it for what it lacks (the scenario loader has checked it has
//             rows for every op the scenario uses); its sources say when a
//             shape was extrapolated past the largest measured and when the
//             model folder it recorded now holds other weights;
//   live      the real kernels with the real weights of the scenario's "live"
//             section, on the backend it names (backend/live_costs.hpp).
#include "apps/kvshift/support_costs.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string_view>

#include "apps/kvshift/support_cost_table.hpp"
#include "backend/calibrate/profile_inputs.hpp"
#include "backend/live_costs.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/table_costs.hpp"
#include "input/cost_table.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

/// A view of a cost source owned elsewhere: a live source shared by sweep points, or a table
/// with the roofline behind it (`keep_alive`: what the source points into).
class SharedCosts final : public cost_model::ComputeCosts {
 public:
  explicit SharedCosts(std::shared_ptr<const cost_model::ComputeCosts> c,
                       std::shared_ptr<const void> keep_alive = {})
      : c_(std::move(c)), keep_alive_(std::move(keep_alive)) {}
  Seconds prefill(const cost_model::ModelSpec& m, std::int64_t t) const override {
    return c_->prefill(m, t);
  }
  Seconds extend(const cost_model::ModelSpec& m, std::int64_t prefix,
                 std::int64_t t) const override {
    return c_->extend(m, prefix, t);
  }
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t b,
                      std::int64_t n) const override {
    return c_->decode_step(m, b, n);
  }
  Seconds reconstruct(const cost_model::ModelSpec& m, const cost_model::OmissionPlan& t,
                      std::int64_t tokens, std::int64_t n, cost_model::DType d) const override {
    return c_->reconstruct(m, t, tokens, n, d);
  }
  Seconds proxy_score(const cost_model::ModelSpec& p, const cost_model::ModelSpec& m,
                      std::int64_t t) const override {
    return c_->proxy_score(p, m, t);
  }
  Seconds prune(const cost_model::ModelSpec& m, std::int64_t t, double rho) const override {
    return c_->prune(m, t, rho);
  }
  std::vector<cost_model::OpSource> sources() const override { return c_->sources(); }

 private:
  std::shared_ptr<const cost_model::ComputeCosts> c_;
  std::shared_ptr<const void> keep_alive_;
};

/// A cost table with what a reader must know beside its numbers: the shapes asked beyond the
/// measured ones (extrapolated) and a model folder whose weights are no longer those measured.
/// Both are appended to the table ops' sources (console table and summary cost_sources).
class CheckedTableCosts final : public cost_model::ComputeCosts {
 public:
  CheckedTableCosts(std::shared_ptr<const cost_model::ComputeCosts> table,
                    std::shared_ptr<const void> keep_alive, const input::CostTable& info,
                    std::string provenance)
      : c_(std::move(table)),
        keep_alive_(std::move(keep_alive)),
        provenance_(std::move(provenance)) {
    for (std::size_t i = 0; i < kOps.size(); ++i) {
      for (const auto& e : info.entries) {
        if (e.op != kOps[i]) continue;
        measured_max_[i] = std::max(measured_max_[i], e.tokens);
      }
    }
  }
  Seconds prefill(const cost_model::ModelSpec& m, std::int64_t t) const override {
    note(kPrefill, t);
    return c_->prefill(m, t);
  }
  Seconds extend(const cost_model::ModelSpec& m, std::int64_t prefix,
                 std::int64_t t) const override {
    note(kPrefill, prefix + t);
    return c_->extend(m, prefix, t);
  }
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t b,
                      std::int64_t n) const override {
    note(kDecode, std::max<std::int64_t>(1, n / std::max<std::int64_t>(b, 1)));
    return c_->decode_step(m, b, n);
  }
  Seconds reconstruct(const cost_model::ModelSpec& m, const cost_model::OmissionPlan& t,
                      std::int64_t tokens, std::int64_t n, cost_model::DType d) const override {
    if (!t.empty()) note(kReconstruct, tokens);
    return c_->reconstruct(m, t, tokens, n, d);
  }
  Seconds proxy_score(const cost_model::ModelSpec& p, const cost_model::ModelSpec& m,
                      std::int64_t t) const override {
    note(kProxyScore, t);
    return c_->proxy_score(p, m, t);
  }
  Seconds prune(const cost_model::ModelSpec& m, std::int64_t t, double rho) const override {
    note(kPrune, t);
    return c_->prune(m, t, rho);
  }
  std::vector<cost_model::OpSource> sources() const override {
    std::vector<cost_model::OpSource> out = c_->sources();
    for (cost_model::OpSource& s : out) {
      if (!s.source.starts_with("table ")) continue;  // the roofline behind the table
      const auto i =
          static_cast<std::size_t>(std::find(kOps.begin(), kOps.end(), s.op) - kOps.begin());
      if (i < kOps.size()) s.source += extrapolation(i);
      if (!provenance_.empty()) s.source += "; " + provenance_;
    }
    return out;
  }

 private:
  enum Op : std::size_t { kPrefill, kDecode, kReconstruct, kProxyScore, kPrune };
  static constexpr std::array<std::string_view, 5> kOps{"prefill", "decode", "reconstruct",
                                                        "proxy_score", "prune"};

  void note(Op op, std::int64_t tokens) const {
    std::int64_t seen = asked_max_[op].load(std::memory_order_relaxed);
    while (tokens > seen && !asked_max_[op].compare_exchange_weak(seen, tokens)) {
    }
  }

  /// "; prefill at 32,768 tokens extrapolated 4x past the largest measured (8,192)", or "".
  std::string extrapolation(std::size_t i) const {
    const std::int64_t hi = asked_max_[i].load();
    std::string out;
    char text[160];
    if (measured_max_[i] > 0 && hi > measured_max_[i]) {
      std::snprintf(text, sizeof text,
                    "; %s at %s tokens extrapolated %.3gx past the largest measured (%s)",
                    std::string(kOps[i]).c_str(), grouped(hi).c_str(),
                    static_cast<double>(hi) / static_cast<double>(measured_max_[i]),
                    grouped(measured_max_[i]).c_str());
      out += text;
    }
    return out;
  }

  static std::string grouped(std::int64_t v) {
    std::string s = std::to_string(v), out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
      out += s[i];
    }
    return out;
  }

  std::shared_ptr<const cost_model::ComputeCosts> c_;
  std::shared_ptr<const void> keep_alive_;
  std::string provenance_;
  std::array<std::int64_t, 5> measured_max_{};  ///< per op, the largest tokens measured
  mutable std::array<std::atomic<std::int64_t>, 5> asked_max_{};  ///< and asked in the run
};

/// The folder a table's recorded input path names, looked up from the working folder and
/// then beside the table and its parents (tables keep paths relative to where profile ran).
std::optional<fs::path> find_recorded(const std::string& recorded, const std::string& table) {
  std::error_code ec;
  if (recorded.empty()) return std::nullopt;
  if (fs::exists(recorded, ec)) return fs::path(recorded);
  for (fs::path dir = fs::absolute(table, ec).parent_path(); !dir.empty();
       dir = dir.parent_path()) {
    if (fs::exists(dir / recorded, ec)) return dir / recorded;
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

/// The digest of a model folder, computed once per process (hashing reads every weight).
std::string cached_digest(const fs::path& folder) {
  static std::mutex mutex;
  static std::map<std::string, std::string> cache;
  const std::lock_guard lock(mutex);
  const std::string key = fs::weakly_canonical(folder).string();
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, backend::calibrate::digest_path(key)).first;
  return it->second;
}

/// "" when the table's model weights are those on disk now (or cannot be found to check),
/// else a sentence that says they differ.
std::string model_provenance(const input::CostTable& table, const std::string& table_path) {
  const auto model = table.inputs.find("model");
  if (model == table.inputs.end() || model->second.digest.empty()) return "";
  const std::optional<fs::path> folder = find_recorded(model->second.path, table_path);
  if (!folder) return "";
  const std::string now = cached_digest(*folder);
  if (now == model->second.digest) return "";
  return "warning: measured on weights " + model->second.digest + " but " + folder->string() +
         " is now " + now + " (other weights: the timings may not be this model's)";
}

std::unique_ptr<backend::Profiler> live_profiler(const std::string& name) {
  if (name == "cpu") return backend::make_cpu_profiler();
  try {
    return backend::make_cuda_profiler();
  } catch (const std::exception& e) {  // not compiled, or no usable device: never a silent CPU run
    throw InputError(std::string("/live/backend: \"cuda\" cannot run here: ") + e.what());
  }
}

std::unique_ptr<cost_model::ComputeCosts> live_costs(const input::ScenarioSpec& spec) {
  const input::LiveSpec& l = spec.cost_source.live;
  auto profiler = live_profiler(l.backend);
  backend::ProfileRequest req;
  req.model = spec.model;
  if (spec.risk_kv) {
    req.omission = spec.risk_kv->omission;
    req.predictor_dtype = spec.risk_kv->predictor_dtype;
  }
  backend::calibrate::ProfilePaths paths;
  paths.model = l.model;
  paths.proxy = l.proxy;
  paths.proxy_layers = l.proxy_layers;
  paths.predictors = req.omission.empty() ? "" : l.predictors;
  paths.mapper = spec.proxy_kv ? l.mapper : "";
  paths.names = {"/live/model", "/live/proxy", "/live/proxy_layers", "/live/predictors",
                 "/live/mapper"};
  req.inputs = backend::calibrate::load_profile_inputs(paths, req.omission);
  if (spec.proxy_kv) {
    if (!req.inputs.proxy) {
      throw InputError(
          "/live: the scenario uses ProxyKV but names no proxy weights (give "
          "\"mapper\", whose mapper.json names its proxy, or \"proxy\")");
    }
    req.proxy = spec.proxy_kv->proxy_model;
    req.retention = spec.proxy_kv->retention;
    const auto& real = req.inputs.proxy->spec;
    if (real.layers != req.proxy->layers || real.hidden != req.proxy->hidden ||
        real.q_heads != req.proxy->q_heads) {
      throw InputError("/live/mapper: its proxy " + real.name + " (" + std::to_string(real.layers) +
                       " layers) is not the scenario's proxy_kv.proxy_model " + req.proxy->name +
                       " (" + std::to_string(req.proxy->layers) + " layers)");
    }
  }
  req.warmup = l.warmup;
  req.repeats = l.repeats;
  req.seed = spec.seed;
  return std::make_unique<backend::LiveCosts>(std::move(profiler), std::move(req));
}

}  // namespace

namespace {

/// What a live source's measurements depend on.
std::string live_key(const input::ScenarioSpec& s) {
  const input::LiveSpec& l = s.cost_source.live;
  std::string k = l.backend + "|" + l.model + "|" + l.proxy + "|" + std::to_string(l.proxy_layers) +
                  "|" + l.predictors + "|" + l.mapper + "|" + std::to_string(l.warmup) + "|" +
                  std::to_string(l.repeats) + "|" + s.model.name;
  if (s.risk_kv) {
    k += "|" + s.risk_kv->omission.describe() + "|" +
         std::string(cost_model::dtype_name(s.risk_kv->predictor_dtype));
  }
  if (s.proxy_kv)
    k += "|" + s.proxy_kv->proxy_model.name + "|" + std::to_string(s.proxy_kv->retention);
  return k;
}

}  // namespace

sweep::CostFactory shared_cost_factory() {
  struct Cache {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<const cost_model::ComputeCosts>> live;
  };
  auto cache = std::make_shared<Cache>();
  return [cache](const input::ScenarioSpec& spec) -> std::unique_ptr<cost_model::ComputeCosts> {
    if (spec.cost_source.kind != input::CostSourceKind::kLive) return make_compute_costs(spec);
    const std::lock_guard lock(cache->mutex);  // the first point measures; the others wait
    auto& slot = cache->live[live_key(spec)];
    if (!slot) slot = make_compute_costs(spec);
    return std::make_unique<SharedCosts>(slot);
  };
}

std::optional<std::string> live_cost_table(const cost_model::ComputeCosts& costs) {
  if (const auto* live = dynamic_cast<const backend::LiveCosts*>(&costs)) {
    const input::CostTable t =
        measured_table(live->profiler(), live->request(), live->measured_rows());
    if (!t.entries.empty()) return input::cost_table_json(t).dump(2) + "\n";
  }
  return std::nullopt;
}

std::unique_ptr<cost_model::ComputeCosts> make_compute_costs(const input::ScenarioSpec& spec) {
  switch (spec.cost_source.kind) {
    case input::CostSourceKind::kAnalytic:
      return std::make_unique<cost_model::RooflineCosts>(spec.gpu);
    case input::CostSourceKind::kProfile: {
      const input::CostTable table = input::read_cost_table(spec.cost_source.profile_path);
      if (table.model != spec.model.name) {
        throw InputError("/cost_source: " + spec.cost_source.profile_path + " was measured for " +
                         table.model + ", not " + spec.model.name);
      }
      auto roofline = std::make_shared<const cost_model::RooflineCosts>(spec.gpu);
      auto costs = std::make_shared<const cost_model::TableCosts>(
          input::make_table_costs(table, spec.cost_source.profile_path, roofline.get()));
      return std::make_unique<CheckedTableCosts>(
          std::move(costs), std::move(roofline), table,
          model_provenance(table, spec.cost_source.profile_path));
    }
    case input::CostSourceKind::kLive:
      return live_costs(spec);
  }
  return nullptr;
}

}  // namespace kvshift::app
