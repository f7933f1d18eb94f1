// Limits a scenario must respect before it is simulated: a name that can name
// an output folder, a run whose arrivals and link samples fit in memory (an
// estimate from the rate, the duration and the sampling interval, against a
// fixed cap), and prompts that fit the model's context. Each problem names its
// field and the estimate, so a run is refused at validate instead of dying of
// std::bad_alloc. Leaves out: memory of everything else (replicas, traces),
// which grows with the cluster and the trace file, both already in memory.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cost_model/units.hpp"
#include "input/scenario_parts.hpp"
#include "input/spec_files.hpp"

namespace kvshift::input::detail {
namespace {

/// Arrivals one strategy's run may generate (a 10,240-GPU fleet for an hour is 10 million).
constexpr double kMaxArrivals = 20'000'000;
/// A request waiting for a GPU holds about 1 KB; a cluster offered more than kMaxRatePerGpu
/// requests/s per GPU serves almost none of them, so with over kMaxWaiting arrivals
/// they would pile up in memory.
constexpr double kMaxRatePerGpu = 100;  // shipped scenarios offer at most 6
constexpr double kMaxWaiting = 1'000'000;
/// Link samples one run may keep (about 64 bytes each): links.csv rows before idle
/// directions are dropped, so the estimate counts every direction of every link.
constexpr double kMaxLinkSamples = 50'000'000;

std::string count_text(double v) {
  if (v < 1e9) {
    const std::string s = format_number("%.0f", v);
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
      out += s[i];
    }
    return out;
  }
  return format_number("%.3g", v);
}

/// The largest value a token distribution asks for: fixed its value, uniform its max,
/// lognormal its max when the file gives one, else its mean (`node`: the distribution's JSON).
std::int64_t largest(const sim::TokenDist& d, const Json* node) {
  if (d.kind == sim::TokenDistKind::kFixed) return d.value;
  if (d.kind == sim::TokenDistKind::kUniform) return d.max;
  if (node && node->is_object() && node->contains("max")) return d.max;
  return static_cast<std::int64_t>(d.mean);
}

/// A reader of the object at `key` of `top` (which the loader found an object).
Reader below(const Reader& top, const std::string& key) {
  return Reader(top.node()[key], "/" + key, top.diagnostics());
}

}  // namespace

void check_scenario_name(const Reader& top, const std::string& name) {
  std::string why;
  if (name.empty()) {
    why = "must not be empty (it names the output folder)";
  } else if (name == "." || name == "..") {
    why = "must not be \"" + name + "\" (it names the output folder)";
  } else if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos) {
    why = "must not contain / or \\ (it names one output folder, not a path)";
  } else {
    for (const char c : name) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        why = "must not contain control characters such as a newline or tab";
        break;
      }
    }
  }
  if (!why.empty()) top.problem("name", why + " (got " + Json(name).dump() + ")");
}

void check_run_size(const Reader& top, ScenarioSpec& s) {
  const double duration = s.duration.value;
  if (!(duration > 0)) return;  // reported where it is parsed
  const sim::WorkloadSpec& w = s.workload;
  if (w.arrival != sim::ArrivalKind::kTrace && w.rate_per_s > 0) {
    double arrivals = w.rate_per_s * duration;
    if (w.max_requests > 0) arrivals = std::min(arrivals, static_cast<double>(w.max_requests));
    if (arrivals > kMaxArrivals) {
      below(top, "workload")
          .problem("rate", format_g(w.rate_per_s) + " requests/s over " + format_g(duration) +
                               " s is about " + count_text(arrivals) +
                               " arrivals per strategy, more than the " + count_text(kMaxArrivals) +
                               " a run may simulate: lower the rate or the duration, or set "
                               "/workload/max_requests");
    }
    double gpus = 0;
    for (const sim::ClusterNode& n : s.cluster.nodes) gpus += n.gpu_count;
    if (arrivals <= kMaxArrivals && arrivals > kMaxWaiting && gpus > 0 &&
        w.rate_per_s / gpus > kMaxRatePerGpu) {
      below(top, "workload")
          .problem("rate",
                   format_number("%.3g", w.rate_per_s / gpus) + " requests/s per GPU (" +
                       count_text(gpus) +
                       " GPUs) is far beyond what a GPU serves: nearly all of the about " +
                       count_text(arrivals) +
                       " arrivals would wait in memory (about 1 KB each); lower the rate or the "
                       "duration, or set /workload/max_requests");
    }
  }
  if (w.arrival == sim::ArrivalKind::kTrace && !w.trace.empty()) {
    std::size_t late = 0;
    for (const sim::TraceRequest& r : w.trace) late += r.arrival.value * w.time_scale >= duration;
    if (late > 0) {
      s.notes.push_back("/workload/trace: " + std::to_string(late) + " of " +
                        std::to_string(w.trace.size()) + " requests arrive after the " +
                        format_g(duration) + " s the scenario lasts and are never simulated");
    }
  }
  const double interval = s.link_sample_interval.value;
  const double directions = 2.0 * static_cast<double>(s.cluster.links.size());
  if (interval > 0 && directions > 0) {
    const double instants = std::floor(duration / interval);
    const double samples = instants * directions;
    if (samples > kMaxLinkSamples) {
      const std::string need = format_number("%.3g", duration * directions / kMaxLinkSamples);
      const std::string every = format_g(interval);
      const Reader at = top.has("outputs") ? below(top, "outputs") : top;
      at.problem(top.has("outputs") ? "link_sample_interval" : "outputs",
                 "a sample every " + every + " s over the run is up to " + count_text(samples) +
                     " link samples (" + count_text(instants) + " instants x " +
                     count_text(directions) + " link directions), more than the " +
                     count_text(kMaxLinkSamples) +
                     " a run may keep in memory: set outputs.link_sample_interval to at least " +
                     need + " s");
    }
  }
}

void check_context(const Reader& top, ScenarioSpec& s, const LoadContext& ctx) {
  if (top.has("deployments") || !top.has("model")) return;
  const Json& m = top.node()["model"];
  std::string model;
  if (m.is_string()) {
    model = m.get<std::string>();
    if (model.find('/') != std::string::npos || model.ends_with(".json")) {
      model = input_file(ctx, model, true);
    }
  } else if (m.is_object() && m.contains("base") && m["base"].is_string() && !m.contains("name")) {
    model = m["base"].get<std::string>();
  }
  if (model.empty()) return;
  const std::optional<std::int64_t> context = model_context_tokens(model);
  if (!context) return;
  const std::string limit = s.model.name + "'s context of " + std::to_string(*context) +
                            " tokens (max_position_embeddings)";
  const sim::WorkloadSpec& w = s.workload;
  if (w.arrival == sim::ArrivalKind::kTrace) {
    std::int64_t over = 0, longest = 0;
    for (const sim::TraceRequest& r : w.trace) {
      const std::int64_t t = r.prompt_tokens + r.output_tokens;
      longest = std::max(longest, t);
      over += t > *context ? 1 : 0;
    }
    if (over > 0) {
      s.notes.push_back("/workload/trace: " + std::to_string(over) + " of " +
                        std::to_string(w.trace.size()) + " requests need more than " + limit +
                        " (the longest " + std::to_string(longest) +
                        " prompt + output tokens); the model was not trained for them");
    }
    return;
  }
  const Json* workload = top.node().contains("workload") ? &top.node()["workload"] : nullptr;
  auto dist = [&](const char* key) -> const Json* {
    return workload && workload->is_object() && workload->contains(key) ? &(*workload)[key]
                                                                        : nullptr;
  };
  const std::int64_t prompt = largest(w.prompt_tokens, dist("prompt_tokens"));
  const std::int64_t output = largest(w.output_tokens, dist("output_tokens"));
  if (prompt > *context) {
    below(top, "workload")
        .problem("prompt_tokens",
                 "prompts of up to " + std::to_string(prompt) + " tokens do not fit " + limit);
  } else if (prompt + output > *context) {
    s.notes.push_back("/workload/output_tokens: prompts of up to " + std::to_string(prompt) +
                      " tokens plus up to " + std::to_string(output) +
                      " generated tokens go beyond " + limit +
                      "; the model was not trained for such lengths");
  }
}

}  // namespace kvshift::input::detail
