// Cost sources for the simulator (ARCHITECTURE.md, "Cost sources"):
//   analytic  the roofline estimate of the scenario's GPU spec;
//   profile   a cost table measured by `kvshift profile`, the roofline behind
//             it for what it lacks (the scenario loader has checked it has
//             rows for every op the scenario uses); its sources say when a
//             shape was extrapolated past the largest measured and when the
//             model folder it recorded now holds other weights
//             (support_table_notes.hpp);
//   live      the real kernels with the real weights of the scenario's "live"
//             section, on the backend it names (backend/live_costs.hpp).
#include "apps/kvshift/support_costs.hpp"

#include <map>
#include <mutex>

#include "apps/kvshift/support_cost_table.hpp"
#include "apps/kvshift/support_table_notes.hpp"
#include "backend/calibrate/profile_inputs.hpp"
#include "backend/live_costs.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/table_costs.hpp"
#include "input/cost_table.hpp"

namespace kvshift::app {
namespace {

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
      return checked_table_costs(std::move(costs), std::move(roofline), table,
                                 spec.cost_source.profile_path);
    }
    case input::CostSourceKind::kLive:
      return live_costs(spec);
  }
  return nullptr;
}

}  // namespace kvshift::app
