// The calibration procedure; see calibration.hpp.
#include "backend/calibrate/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "backend/calibrate/parallel.hpp"
#include "backend/calibrate/probe.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/topology.hpp"

namespace kvshift::backend::calibrate {
namespace {

using cost_model::GroupPlan;
using Clock = std::chrono::steady_clock;
using Probes = std::vector<std::unique_ptr<RequestProbe>>;

class Progress {
 public:
  Progress(const ProgressFn& fn, std::int64_t total) : fn_(fn), total_(total) {}
  void stage(std::string s) {
    const std::lock_guard lock(m_);
    stage_ = std::move(s);
    if (fn_) fn_(stage_, done_, total_);
  }
  void add(std::int64_t n = 1) {
    const std::lock_guard lock(m_);
    done_ = std::min(total_, done_ + n);
    if (fn_) fn_(stage_, done_, total_);
  }

 private:
  const ProgressFn& fn_;
  std::int64_t total_, done_ = 0;
  std::string stage_;
  std::mutex m_;
};

/// Everything the stages share.
struct Context {
  const Model& model;
  const CalibrationOptions& o;
  std::span<const std::int32_t> corpus;
  Progress& progress;
  FitData fit_data;
  std::map<std::pair<int, std::vector<int>>, FittedGroup> fits;
};

std::span<const std::int32_t> history_of(const Context& c, const Window& w) {
  return c.corpus.subspan(static_cast<std::size_t>(w.start), static_cast<std::size_t>(c.o.history));
}
std::span<const std::int32_t> eval_of(const Context& c, const Window& w) {
  return c.corpus.subspan(static_cast<std::size_t>(w.start + c.o.history),
                          static_cast<std::size_t>(c.o.eval));
}

std::vector<GroupPlan> plans_for(const Context& c, const std::vector<int>& groups) {
  return cost_model::Topology::from_groups(c.model.spec().layers, groups,
                                           {c.o.group_width, c.o.anchor_width})
      .groups();
}

/// Fits every plan not fitted yet (in parallel) and returns their predictors.
std::vector<const FittedGroup*> ensure_fits(Context& c, const std::vector<GroupPlan>& plans) {
  std::vector<const GroupPlan*> missing;
  for (const GroupPlan& p : plans) {
    const auto key = std::make_pair(p.group, p.anchor_layers);
    if (!c.fits.contains(key) &&
        std::none_of(missing.begin(), missing.end(), [&](const GroupPlan* m) {
          return m->group == p.group && m->anchor_layers == p.anchor_layers;
        })) {
      missing.push_back(&p);
    }
  }
  std::vector<FittedGroup> fitted(missing.size());
  parallel_for(missing.size(), c.o.threads, [&](std::size_t i) {
    fitted[i] = fit_group(c.fit_data, c.model.weights(), missing[i]->group,
                          missing[i]->target_layers, missing[i]->anchor_layers, c.o.alphas);
    c.progress.add();
  });
  for (std::size_t i = 0; i < missing.size(); ++i) {
    c.fits.emplace(std::make_pair(missing[i]->group, missing[i]->anchor_layers),
                   std::move(fitted[i]));
  }
  std::vector<const FittedGroup*> out;
  for (const GroupPlan& p : plans) out.push_back(&c.fits.at({p.group, p.anchor_layers}));
  return out;
}

Probes make_probes(Context& c, const std::vector<Window>& windows, const std::vector<int>& resume) {
  Probes probes(windows.size());
  parallel_for(windows.size(), c.o.threads, [&](std::size_t i) {
    probes[i] = std::make_unique<RequestProbe>(c.model, history_of(c, windows[i]),
                                               eval_of(c, windows[i]), resume);
    c.progress.add();
  });
  return probes;
}

/// ΔNLL of one request with the given predictors' target layers reconstructed.
double delta_nll(const Model& model, const RequestProbe& probe,
                 const std::vector<const FittedGroup*>& topo) {
  KvCache cache = probe.exact_cache();
  KvCache* ptr = &cache;
  int first = model.spec().layers;
  for (const FittedGroup* g : topo) {
    reconstruct_group(g->predictor, std::span<KvCache* const>(&ptr, 1), model.spec());
    first = std::min(first, g->predictor.target_layers.front());
  }
  return mean_of(probe.nll_with(std::move(cache), first)) - probe.exact_mean();
}

/// deltas[t][r] for every topology t on every probe r.
std::vector<std::vector<double>> evaluate(
    Context& c, const Probes& probes, const std::vector<std::vector<const FittedGroup*>>& topos) {
  std::vector<std::vector<double>> d(topos.size(), std::vector<double>(probes.size()));
  parallel_for(probes.size(), c.o.threads, [&](std::size_t r) {
    for (std::size_t t = 0; t < topos.size(); ++t) {
      d[t][r] = delta_nll(c.model, *probes[r], topos[t]);
      c.progress.add();
    }
  });
  return d;
}

/// Layers a probe may be resumed from: the first target layer of every candidate group.
std::vector<int> resume_layers(const Context& c, const std::vector<int>& candidates) {
  std::vector<int> layers;
  for (int g : candidates) layers.push_back((g - 1) * c.o.group_width);
  return layers;
}

double saved_bytes(const Context& c, const GroupPlan& p) {
  return static_cast<double>(p.target_layers.size()) *
         static_cast<double>(c.model.spec().kv_bytes_per_layer_token()) *
         static_cast<double>(c.o.history - 1);
}

TestQuality test_quality(const Context& c, const Probes& probes, const std::vector<int>& groups,
                         const std::vector<double>& deltas) {
  TestQuality q;
  q.groups = groups;
  std::sort(q.groups.begin(), q.groups.end());
  int omitted = 0;
  if (!groups.empty()) {
    for (const GroupPlan& p : plans_for(c, groups))
      omitted += static_cast<int>(p.target_layers.size());
  }
  q.omitted_fraction = static_cast<double>(omitted) / c.model.spec().layers;
  q.requests = static_cast<int>(probes.size());
  q.per_request = deltas;
  double exact = 0.0;
  for (const auto& p : probes) exact += p->exact_mean();
  exact /= static_cast<double>(probes.size());
  q.delta_nll_mean = mean_of(deltas);
  q.ppl_exact = std::exp(exact);
  q.ppl_reconstructed = std::exp(exact + q.delta_nll_mean);
  const auto ci = bootstrap_interval(deltas, 0.95, c.o.resamples, c.o.seed + 3);
  q.ci95_low = ci.first;
  q.ci95_high = ci.second;
  q.violation_rate = static_cast<double>(std::count_if(deltas.begin(), deltas.end(),
                                                       [&](double d) { return d > c.o.eps; })) /
                     static_cast<double>(deltas.size());
  return q;
}

void check_options(const Model& model, std::span<const std::int32_t> corpus,
                   const CalibrationOptions& o) {
  if (o.history < 2)
    throw InputError("--history: must be >= 2 tokens (got " + std::to_string(o.history) + ")");
  if (o.eval < 1)
    throw InputError("--eval: must be >= 1 token (got " + std::to_string(o.eval) + ")");
  if (!(o.eps >= 0.0) || !std::isfinite(o.eps))
    throw InputError("--eps: must be a finite number >= 0");
  if (o.resamples < kMinResamples) {
    throw InputError("--resamples: the gates need at least " + std::to_string(kMinResamples) +
                     " bootstrap resamples (got " + std::to_string(o.resamples) + ")");
  }
  if (o.gate == Gate::kStableSplit && o.counts.confirm < 1) {
    throw InputError("--gate stable-split: needs a confirmation set (--requests ...,confirm:N)");
  }
  if (o.threads < 1) throw InputError("--threads: must be >= 1");
  (void)model;
  (void)corpus;
}

}  // namespace

std::vector<int> interior_groups(int layers, int group_width) {
  const int count = (layers + group_width - 1) / group_width;
  std::vector<int> g;
  for (int i = 2; i < count; ++i) g.push_back(i);
  return g;
}

CalibrationResult run_calibration(const Model& model, std::span<const std::int32_t> corpus,
                                  const CalibrationOptions& options,
                                  const ProgressFn& progress_fn) {
  check_options(model, corpus, options);
  const auto& spec = model.spec();
  CalibrationResult res;
  res.options = options;
  std::vector<int> candidates = options.candidates.empty()
                                    ? interior_groups(spec.layers, options.group_width)
                                    : options.candidates;
  std::sort(candidates.begin(), candidates.end());
  if (candidates.empty()) {
    throw InputError("--groups: the model has no interior " + std::to_string(options.group_width) +
                     "-layer group to omit (" + std::to_string(spec.layers) + " layers)");
  }
  const RequestSets sets =
      make_request_sets(static_cast<std::int64_t>(corpus.size()), options.history + options.eval,
                        options.counts, options.seed);
  const auto& n = options.counts;
  const std::int64_t G = static_cast<std::int64_t>(candidates.size());
  Progress progress(progress_fn,
                    n.fit + 2 * G + n.select * (1 + 2 * G) + n.confirm * (1 + G) + n.test * 4);
  Context c{model, options, corpus, progress, {}, {}};
  auto timed = [&](const std::string& name, auto&& fn) {
    const auto t0 = Clock::now();
    progress.stage(name);
    fn();
    res.stage_seconds.emplace_back(name, std::chrono::duration<double>(Clock::now() - t0).count());
  };

  timed("fit data", [&] {
    std::vector<std::span<const std::int32_t>> hist;
    for (const Window& w : sets.fit) hist.push_back(history_of(c, w));
    c.fit_data = gather_fit_data(model, hist, std::max(1, n.fit / 6), options.threads);
  });

  // Singles: each candidate alone.
  std::vector<std::vector<GroupPlan>> single_plans;
  for (int g : candidates) single_plans.push_back(plans_for(c, {g}));
  Probes select;
  timed("select: singles", [&] {
    std::vector<GroupPlan> all;
    for (const auto& p : single_plans) all.push_back(p.front());
    const auto fitted = ensure_fits(c, all);
    select = make_probes(c, sets.select, resume_layers(c, candidates));
    std::vector<std::vector<const FittedGroup*>> topos;
    for (const FittedGroup* f : fitted) topos.push_back({f});
    res.single_deltas = evaluate(c, select, topos);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      res.singles.push_back(
          {candidates[i], mean_of(res.single_deltas[i]), saved_bytes(c, single_plans[i].front())});
    }
  });
  double exact = 0.0;
  for (const auto& p : select) exact += p->exact_mean();
  res.exact_nll_select = exact / static_cast<double>(select.size());
  res.order = order_by_risk_per_byte(res.singles);

  // Prefixes {π1..πk}, evaluated jointly (k = 1 is the single π1).
  std::vector<std::vector<const FittedGroup*>> prefix_topos;
  timed("select: prefixes", [&] {
    std::vector<std::vector<GroupPlan>> prefix_plans;
    std::vector<GroupPlan> all_plans;
    for (std::size_t k = 1; k <= res.order.size(); ++k) {
      const std::vector<int> groups(res.order.begin(), res.order.begin() + static_cast<long>(k));
      try {
        prefix_plans.push_back(plans_for(c, groups));
      } catch (const InputError&) {
        break;  // too few kept layers left for anchors: this and longer prefixes are infeasible
      }
      all_plans.insert(all_plans.end(), prefix_plans.back().begin(), prefix_plans.back().end());
      PrefixOutcome p;
      p.groups = groups;
      for (const GroupPlan& plan : prefix_plans.back()) p.omitted_bytes += saved_bytes(c, plan);
      res.prefixes.push_back(std::move(p));
    }
    // One batch, so every (group, anchors) pair the prefixes need is fitted in parallel.
    const auto fitted = ensure_fits(c, all_plans);
    auto next = fitted.begin();
    for (const auto& plans : prefix_plans) {
      prefix_topos.emplace_back(next, next + static_cast<long>(plans.size()));
      next += static_cast<long>(plans.size());
    }
    std::vector<std::vector<const FittedGroup*>> to_eval(prefix_topos.begin() + 1,
                                                         prefix_topos.end());
    auto d = evaluate(c, select, to_eval);
    const auto first =
        std::find(candidates.begin(), candidates.end(), res.order.front()) - candidates.begin();
    d.insert(d.begin(), res.single_deltas[static_cast<std::size_t>(first)]);
    for (std::size_t k = 0; k < res.prefixes.size(); ++k) {
      res.prefixes[k].mean = mean_of(d[k]);
      res.prefixes[k].upper90 = bootstrap_upper(d[k], 0.9, options.resamples, options.seed + 1);
    }
  });
  select.clear();

  if (n.confirm > 0) {
    timed("confirm", [&] {
      const Probes confirm = make_probes(c, sets.confirm, resume_layers(c, candidates));
      const auto d = evaluate(c, confirm, prefix_topos);
      for (std::size_t k = 0; k < res.prefixes.size(); ++k) {
        res.prefixes[k].confirm_upper90 =
            bootstrap_upper(d[k], 0.9, options.resamples, options.seed + 2);
      }
    });
  }

  // Each gate's choice, the requested gate first.
  std::vector<Gate> gates{options.gate};
  for (Gate g : {Gate::kMean, Gate::kUpper90, Gate::kStableSplit}) {
    if (g != options.gate && (g != Gate::kStableSplit || n.confirm > 0)) gates.push_back(g);
  }
  for (Gate g : gates) res.gates.push_back({g, choose_prefix(res.prefixes, g, options.eps), {}});

  timed("test", [&] {
    const Probes test = make_probes(c, sets.test, resume_layers(c, candidates));
    std::vector<std::size_t> distinct;
    for (const GateChoice& gc : res.gates) {
      if (gc.prefix && std::find(distinct.begin(), distinct.end(), *gc.prefix) == distinct.end()) {
        distinct.push_back(*gc.prefix);
      }
    }
    std::vector<std::vector<const FittedGroup*>> topos;
    for (std::size_t k : distinct) topos.push_back(prefix_topos[k]);
    const auto d = evaluate(c, test, topos);
    for (GateChoice& gc : res.gates) {
      if (gc.prefix) {
        const auto t = std::find(distinct.begin(), distinct.end(), *gc.prefix) - distinct.begin();
        gc.test =
            test_quality(c, test, res.prefixes[*gc.prefix].groups, d[static_cast<std::size_t>(t)]);
      } else {
        gc.test = test_quality(c, test, {}, std::vector<double>(test.size(), 0.0));
      }
    }
  });
  if (const auto& ch = res.chosen(); ch.prefix) {
    for (const FittedGroup* f : prefix_topos[*ch.prefix]) res.predictors.push_back(*f);
  }
  res.fits = c.fits.size();
  return res;
}

}  // namespace kvshift::backend::calibrate
