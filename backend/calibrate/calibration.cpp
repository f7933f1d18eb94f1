// The calibration procedure; see calibration.hpp.
#include "backend/calibrate/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <utility>

#include "backend/calibrate/probe.hpp"
#include "backend/parallel.hpp"
#include "cost_model/input_error.hpp"
#include "cost_model/omission_plan.hpp"

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
  void finish() {
    const std::lock_guard lock(m_);
    done_ = total_;
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
  return cost_model::OmissionPlan::from_groups(c.model.spec().layers, groups,
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
  // Threads left over when fewer fits than threads are missing go inside the fits.
  const int pending = static_cast<int>(std::max<std::size_t>(1, missing.size()));
  const int inner = std::max(1, c.o.threads / pending);
  parallel_for(missing.size(), c.o.threads, [&](std::size_t i) {
    fitted[i] = fit_group(c.fit_data, c.model.weights(), missing[i]->group,
                          missing[i]->target_layers, missing[i]->anchor_layers, c.o.alphas, inner);
    fitted[i].predictor.sink_rows = c.o.sink_rows;
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

/// The predictors of a topology's groups, in PassChain's form.
std::vector<const GroupPredictor*> predictors_of(const std::vector<const FittedGroup*>& topo) {
  std::vector<const GroupPredictor*> p;
  for (const FittedGroup* g : topo) p.push_back(&g->predictor);
  return p;
}

/// ΔNLL of one request with the given predictors' target layers reconstructed, as the next
/// pass of `chain` (the request's previous pass, or a fresh chain).
double delta_nll(PassChain& chain, const RequestProbe& probe,
                 const std::vector<const FittedGroup*>& topo) {
  return mean_of(chain.nll(predictors_of(topo))) - probe.exact_mean();
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

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The measuring side of the selection: a pool of probes, predictors fitted on demand, every
/// (request, topology) pair of a call spread over the threads.
class ProbeOracle final : public SelectionOracle {
 public:
  ProbeOracle(Context& c, const Probes& pool, const std::vector<int>& keep) : c_(c), pool_(pool) {
    for (const auto& p : pool) chains_.emplace_back(*p, keep);
  }

  std::vector<std::vector<double>> measure(const std::vector<std::vector<int>>& topologies,
                                           const std::vector<std::size_t>& requests) override {
    const auto t0 = Clock::now();
    std::vector<std::vector<const FittedGroup*>> topos;
    for (const auto& groups : topologies) topos.push_back(ensure_fits(c_, plans_for(c_, groups)));
    fit_seconds += seconds_since(t0);
    const auto t1 = Clock::now();
    std::vector<std::vector<double>> d(topos.size(), std::vector<double>(requests.size()));
    const std::size_t T = topos.size();
    // One task per request: its topologies run in order, each pass starting where its cache
    // first differs from the request's previous pass (a prefix from the group it adds).
    parallel_for(requests.size(), c_.o.threads, [&](std::size_t i) {
      const std::size_t r = requests[i];
      for (std::size_t t = 0; t < T; ++t) {
        d[t][i] = delta_nll(chains_.at(r), *pool_.at(r), topos[t]);
        c_.progress.add();
      }
    });
    call_seconds.push_back(seconds_since(t1));
    return d;
  }
  bool feasible(const std::vector<int>& groups) const override {
    try {
      plans_for(c_, groups);
      return true;
    } catch (const InputError&) {
      return false;
    }
  }
  double saved_bytes(const std::vector<int>& groups) const override {
    double b = 0.0;
    for (const GroupPlan& p : plans_for(c_, groups)) b += calibrate::saved_bytes(c_, p);
    return b;
  }

  /// Frees the requests' kept residuals (the pool is about to go).
  void forget() { chains_.clear(); }

  double fit_seconds = 0.0;
  std::vector<double> call_seconds;  ///< per measure(): the singles, the order's, the prefixes

 private:
  Context& c_;
  const Probes& pool_;
  std::vector<PassChain> chains_;  // per request of the pool: its last pass
};

/// Test-set quality of one topology, ε-independent parts.
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
  q.upper90 = bootstrap_upper(deltas, 0.9, c.o.resamples, c.o.seed + 4);
  return q;
}

/// The share over `eps` and whether `rule` still holds on the test set (omitting nothing is
/// exact: it holds whatever the test set's size).
void finish_row(GateChoice& g) {
  TestQuality& q = g.test;
  q.eps = g.eps;
  q.violations = count_over(q.per_request, g.eps);
  q.violation_share = static_cast<double>(q.violations) / q.requests;
  q.share_ci95_low = share_lower(q.violations, q.requests, 0.975);
  q.share_ci95_high = share_upper(q.violations, q.requests, 0.975);
  q.share_upper90 = share_upper(q.violations, q.requests, 0.9);
  switch (g.rule.gate) {
    case Gate::kMean:
      g.holds = q.delta_nll_mean <= g.eps;
      break;
    case Gate::kUpper90:
    case Gate::kStableSplit:
      g.holds = q.upper90 <= g.eps;
      break;
    case Gate::kShare:
      g.holds = q.share_upper90 <= g.rule.share;
      break;
  }
  if (!g.prefix) g.holds = true;
}

void check_options(const CalibrationOptions& o) {
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
  if (o.gate.gate == Gate::kStableSplit && o.counts.confirm < 1) {
    throw InputError("--gate stable-split: needs a confirmation set (--requests ...,confirm:N)");
  }
  if (o.threads < 1) throw InputError("--threads: must be >= 1");
  if (o.sink_rows < 0 || o.sink_rows >= o.history) {
    throw InputError("--sink-rows: must be in 0.." + std::to_string(o.history - 1) +
                     " (fewer than --history; got " + std::to_string(o.sink_rows) + ")");
  }
}

/// The rules of the frontier: the requested one, then mean, upper90, share, stable-split.
std::vector<GateRule> frontier_rules(const CalibrationOptions& o) {
  std::vector<GateRule> rules{o.gate};
  const double share = o.gate.gate == Gate::kShare ? o.gate.share : o.frontier_share;
  for (GateRule r : {GateRule(Gate::kMean), GateRule(Gate::kUpper90), GateRule(Gate::kShare, share),
                     GateRule(Gate::kStableSplit)}) {
    if (r.gate == Gate::kStableSplit && o.counts.confirm < 1) continue;
    if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
  }
  return rules;
}

std::vector<double> frontier_eps(const CalibrationOptions& o) {
  std::vector<double> e = o.frontier_eps;
  e.push_back(o.eps);
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  return e;
}

std::vector<std::size_t> ids(std::size_t from, std::size_t count) {
  std::vector<std::size_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = from + i;
  return v;
}

}  // namespace

std::vector<int> interior_groups(int layers, int group_width, int anchor_width) {
  const int count = (layers + group_width - 1) / group_width;
  std::vector<int> g;
  for (int i = 1; i <= count; ++i) {
    if (anchor_room(layers, group_width, i) >= anchor_width) g.push_back(i);
  }
  return g;
}

int anchor_room(int layers, int group_width, int group) {
  return std::min((group - 1) * group_width, layers - std::min(layers, group * group_width));
}

namespace {

/// Runs one stage of the calibration, its name shown and its wall time kept in the result.
class Stages {
 public:
  Stages(Progress& progress, CalibrationResult& res) : progress_(progress), res_(res) {}
  template <class F>
  void operator()(const std::string& name, F&& fn) {
    const auto t0 = Clock::now();
    progress_.stage(name);
    fn();
    res_.stage_seconds.emplace_back(name, seconds_since(t0));
  }

 private:
  Progress& progress_;
  CalibrationResult& res_;
};

/// Orders the groups by ΔNLL risk and gates their prefixes on one pool of probes (the order,
/// selection and confirmation requests); the frontier's rows choose among the prefixes.
void select_prefixes_on(Context& c, const RequestSets& sets, const std::vector<int>& candidates,
                        CalibrationResult& res, Stages& timed) {
  const CalibrationOptions& options = c.o;
  std::vector<Window> pool_windows = sets.order;
  pool_windows.insert(pool_windows.end(), sets.select.begin(), sets.select.end());
  pool_windows.insert(pool_windows.end(), sets.confirm.begin(), sets.confirm.end());
  Probes pool;
  timed("select: probes",
        [&] { pool = make_probes(c, pool_windows, resume_layers(c, candidates)); });
  SelectionInput in;
  in.candidates = candidates;
  in.order_requests = ids(0, sets.order.size());
  in.gate_requests = ids(sets.order.size(), sets.select.size());
  in.confirm_requests = ids(sets.order.size() + sets.select.size(), sets.confirm.size());
  const std::vector<GateRule> rules = frontier_rules(options);
  const std::vector<double> eps_grid = frontier_eps(options);
  in.rules = rules;
  in.eps_max = eps_grid.back();
  in.resamples = options.resamples;
  in.seed = options.seed;
  in.order_rule = options.order_rule;
  in.order_stop = 2 * in.eps_max;
  ProbeOracle oracle(c, pool, resume_layers(c, candidates));
  SelectionOutcome sel = select_prefixes(oracle, in);
  const auto& calls = oracle.call_seconds;
  const auto order_end =
      calls.begin() + std::min<std::ptrdiff_t>(1 + sel.order_measurements,
                                               static_cast<std::ptrdiff_t>(calls.size()));
  res.stage_seconds.emplace_back("select: fits", oracle.fit_seconds);
  res.stage_seconds.emplace_back("select: singles", calls.empty() ? 0.0 : calls.front());
  if (options.order_rule == OrderRule::kGreedy) {
    res.stage_seconds.emplace_back("select: greedy order",
                                   std::accumulate(calls.begin() + 1, order_end, 0.0));
  }
  res.stage_seconds.emplace_back("select: prefixes", std::accumulate(order_end, calls.end(), 0.0));
  res.order_means = std::move(sel.order_means);
  res.order_measurements = sel.order_measurements;
  res.order_stop = in.order_stop;
  res.singles = std::move(sel.singles);
  res.single_deltas = std::move(sel.single_deltas);
  res.order = std::move(sel.order);
  res.prefixes = std::move(sel.prefixes);
  res.cross_fitted = sel.cross_fitted;
  res.stop_reason = std::move(sel.stop_reason);
  double exact = 0.0;
  for (std::size_t id : in.gate_requests) exact += pool[id]->exact_mean();
  res.exact_nll_select = exact / static_cast<double>(in.gate_requests.size());
  oracle.forget();
  pool.clear();

  // The frontier: the requested row first, then every rule at every ε.
  res.gates.push_back({options.gate, options.eps, {}, {}, false});
  for (const GateRule& r : rules) {
    for (double e : eps_grid) res.gates.push_back({r, e, {}, {}, false});
  }
  for (GateChoice& g : res.gates) g.prefix = choose_prefix(res.prefixes, g.rule, g.eps);
}

/// Every frontier row's quality on the held-out test requests: each distinct prefix's ΔNLL
/// per request (shortest first, each pass starting at the group it adds), then the rows.
void measure_on_test(Context& c, const Probes& test, const std::vector<int>& keep,
                     CalibrationResult& res, Progress& progress) {
  std::vector<std::size_t> distinct;
  for (const GateChoice& gc : res.gates) {
    if (gc.prefix && std::find(distinct.begin(), distinct.end(), *gc.prefix) == distinct.end()) {
      distinct.push_back(*gc.prefix);
    }
  }
  std::vector<std::vector<const FittedGroup*>> topos;
  for (std::size_t k : distinct)
    topos.push_back(ensure_fits(c, plans_for(c, res.prefixes[k].groups)));
  const std::size_t T = topos.size();
  std::vector<std::vector<double>> d(T, std::vector<double>(test.size()));
  std::vector<std::size_t> by_length(T);
  std::iota(by_length.begin(), by_length.end(), 0);
  std::sort(by_length.begin(), by_length.end(),
            [&](std::size_t a, std::size_t b) { return distinct[a] < distinct[b]; });
  parallel_for(test.size(), c.o.threads, [&](std::size_t r) {
    PassChain chain(*test[r], keep);
    for (std::size_t t : by_length) {
      d[t][r] = delta_nll(chain, *test[r], topos[t]);
      progress.add();
    }
  });
  const TestQuality none = test_quality(c, test, {}, std::vector<double>(test.size(), 0.0));
  for (GateChoice& gc : res.gates) {
    if (gc.prefix) {
      const auto t = std::find(distinct.begin(), distinct.end(), *gc.prefix) - distinct.begin();
      gc.test =
          test_quality(c, test, res.prefixes[*gc.prefix].groups, d[static_cast<std::size_t>(t)]);
    } else {
      gc.test = none;
    }
    finish_row(gc);
  }
}

}  // namespace

CalibrationResult run_calibration(const Model& model, std::span<const std::int32_t> corpus,
                                  const CalibrationOptions& options,
                                  const ProgressFn& progress_fn) {
  check_options(options);
  const auto& spec = model.spec();
  CalibrationResult res;
  res.options = options;
  std::vector<int> candidates =
      options.candidates.empty()
          ? interior_groups(spec.layers, options.group_width, options.anchor_width)
          : options.candidates;
  std::sort(candidates.begin(), candidates.end());
  if (candidates.empty()) {
    throw InputError("--groups: the model has no interior " + std::to_string(options.group_width) +
                     "-layer group to omit (" + std::to_string(spec.layers) + " layers, " +
                     std::to_string(options.anchor_width) + " anchor layers on each side)");
  }
  for (const int g : candidates) {
    const int room = anchor_room(spec.layers, options.group_width, g);
    if (room < options.anchor_width) {
      throw InputError("--groups: G" + std::to_string(g) + " has " + std::to_string(room) +
                       " layer(s) on a side, fewer than the " +
                       std::to_string(options.anchor_width) +
                       " exact anchor layers its predictor reads (--anchor-width)");
    }
  }
  const RequestSets sets =
      make_request_sets(static_cast<std::int64_t>(corpus.size()), options.history + options.eval,
                        options.counts, options.seed);
  const auto& n = options.counts;
  const std::int64_t G = static_cast<std::int64_t>(candidates.size());
  const std::int64_t order_n = n.order > 0 ? n.order : n.select;
  // The greedy order measures about one more topology per candidate on the order set.
  const std::int64_t order_passes =
      (options.order_rule == OrderRule::kGreedy ? 2 : 1) * order_n * G;
  Progress progress(progress_fn, n.total() + 3 * G + order_passes + (n.select + n.confirm) * G +
                                     n.test * std::min<std::int64_t>(G, 6));
  Context c{model, options, corpus, progress, {}, {}};
  Stages timed(progress, res);
  timed("fit data", [&] {
    std::vector<std::span<const std::int32_t>> hist;
    for (const Window& w : sets.fit) hist.push_back(history_of(c, w));
    c.fit_data =
        gather_fit_data(model, hist, std::max(1, n.fit / 6), options.threads, options.sink_rows);
  });
  select_prefixes_on(c, sets, candidates, res, timed);
  Probes test;
  timed("test: probes", [&] { test = make_probes(c, sets.test, resume_layers(c, candidates)); });
  timed("test: passes",
        [&] { measure_on_test(c, test, resume_layers(c, candidates), res, progress); });
  progress.finish();
  if (const auto& ch = res.chosen(); ch.prefix) {
    res.predictors = {};
    for (const FittedGroup* f : ensure_fits(c, plans_for(c, res.prefixes[*ch.prefix].groups))) {
      res.predictors.push_back(*f);
    }
  }
  res.fits = c.fits.size();
  return res;
}

}  // namespace kvshift::backend::calibrate
