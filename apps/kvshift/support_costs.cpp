// Cost sources for the simulator (DESIGN.md, CostProvider):
//   analytic  the roofline estimate of the scenario's GPU spec;
//   profile   a cost table measured by `kvshift profile` (decode steps, which
//             the profiler does not time, come from the roofline);
//   live      the real kernels of this build's backend, run when the
//             simulation first needs a shape. Token counts are bucketed to
//             powers of two (measured on both sides, interpolated log-log) so a
//             run measures a handful of shapes, each once.
#include "apps/kvshift/support_costs.hpp"

#include <cmath>
#include <map>
#include <mutex>

#include "cost_model/input_error.hpp"
#include "cost_model/table_costs.hpp"
#include "scenarios/cost_table.hpp"
#if KVSHIFT_WITH_BACKEND
#include "backend/profiler.hpp"
#endif

namespace kvshift::app {
namespace {

/// A cost table answering prefill/reconstruct, with the roofline behind it.
class ProfiledCosts final : public cost_model::ComputeCosts {
 public:
  ProfiledCosts(const sim::ScenarioSpec& spec, const scenarios::CostTable& table)
      : roofline_(spec.gpu), table_(scenarios::make_table_costs(table, &roofline_)) {}
  Seconds prefill(const cost_model::ModelSpec& m, std::int64_t t) const override {
    return table_.prefill(m, t);
  }
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t b, std::int64_t c) const override {
    return table_.decode_step(m, b, c);
  }
  Seconds reconstruct(const cost_model::ModelSpec& m, const cost_model::Topology& t,
                      std::int64_t tokens, std::int64_t n, cost_model::DType d) const override {
    return table_.reconstruct(m, t, tokens, n, d);
  }

 private:
  cost_model::RooflineCosts roofline_;
  cost_model::TableCosts table_;
};

#if KVSHIFT_WITH_BACKEND
class LiveCosts final : public cost_model::ComputeCosts {
 public:
  LiveCosts(const sim::ScenarioSpec& spec, std::unique_ptr<backend::Profiler> profiler)
      : roofline_(spec.gpu), profiler_(std::move(profiler)) {
    request_.model = spec.model;
    if (spec.proxy_kv) request_.proxy = spec.proxy_kv->proxy_model;
    if (spec.risk_kv) {
      request_.topology = spec.risk_kv->topology;
      request_.predictor_dtype = spec.risk_kv->predictor_dtype;
    }
    request_.warmup = 1;
    request_.repeats = 3;
    request_.seed = spec.seed;
  }
  Seconds prefill(const cost_model::ModelSpec&, std::int64_t t) const override {
    return {bucketed("prefill", t, 1)};
  }
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t b, std::int64_t c) const override {
    return roofline_.decode_step(m, b, c);
  }
  Seconds reconstruct(const cost_model::ModelSpec&, const cost_model::Topology& t,
                      std::int64_t tokens, std::int64_t n, cost_model::DType) const override {
    if (t.empty()) return {0};
    return {bucketed("reconstruct", tokens, n)};
  }

 private:
  // Measures at the powers of two around `t` and interpolates log-log between them.
  double bucketed(const std::string& op, std::int64_t t, std::int64_t n) const {
    std::int64_t lo = 16;
    while (lo * 2 <= t) lo *= 2;
    const std::int64_t hi = lo * 2;
    const double a = measured(op, lo, n), b = measured(op, hi, n);
    if (t <= lo) return a * static_cast<double>(t) / static_cast<double>(lo);
    return cost_model::interpolate_log_log({{double(lo), a}, {double(hi), b}}, double(t));
  }
  double measured(const std::string& op, std::int64_t t, std::int64_t n) const {
    const std::lock_guard lock(mutex_);  // sweeps may share one provider across threads
    const auto key = std::tuple(op, t, n);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    backend::ProfileRequest req = request_;
    req.tokens = {t};
    req.sharing = {n};
    for (const backend::OpTiming& row : profiler_->run(req)) {
      cache_[std::tuple(row.op, row.tokens, row.sharing)] = row.median_s;
    }
    return cache_.at(key);
  }

  cost_model::RooflineCosts roofline_;
  std::unique_ptr<backend::Profiler> profiler_;
  backend::ProfileRequest request_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<std::string, std::int64_t, std::int64_t>, double> cache_;
};
#endif

}  // namespace

std::unique_ptr<cost_model::ComputeCosts> make_compute_costs(const sim::ScenarioSpec& spec) {
  switch (spec.cost_source.kind) {
    case sim::CostSourceKind::kAnalytic:
      return std::make_unique<cost_model::RooflineCosts>(spec.gpu);
    case sim::CostSourceKind::kProfile: {
      const scenarios::CostTable table = scenarios::read_cost_table(spec.cost_source.profile_path);
      if (table.model != spec.model.name) {
        throw InputError("/cost_source: " + spec.cost_source.profile_path + " was measured for " +
                         table.model + ", not " + spec.model.name);
      }
      return std::make_unique<ProfiledCosts>(spec, table);
    }
    case sim::CostSourceKind::kLive:
#if KVSHIFT_WITH_BACKEND
    {
      std::unique_ptr<backend::Profiler> profiler;
      try {
        profiler = backend::make_cuda_profiler();
      } catch (const std::exception&) {
        profiler = backend::make_cpu_profiler();  // no CUDA build or no device: the CPU reference
      }
      return std::make_unique<LiveCosts>(spec, std::move(profiler));
    }
#else
      throw InputError("/cost_source: \"live\" needs the execution backend, which this build leaves out");
#endif
  }
  return nullptr;
}

}  // namespace kvshift::app
