// The "workload" and "serving" sections: arrival process (poisson, gamma,
// trace), token length distributions, shared prefixes, batching, prefix caching. A trace file is
// read here (relative to the scenario's folder) so the simulator never opens files.
#include "cost_model/input_error.hpp"
#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"
#include "input/trace_file.hpp"

namespace kvshift::input::detail {
namespace {

constexpr std::int64_t kMaxTokens = 10'000'000;

}  // namespace

sim::TokenDist parse_token_dist(const Reader& w, std::string_view key, std::int64_t min_value) {
  sim::TokenDist d;
  if (w.has(key) && w.node()[key].is_number()) {
    if (auto v = int_in(w, key, min_value, kMaxTokens, true)) d.value = *v;
    return d;
  }
  auto r = w.object(key);
  if (!r) return d;
  r->allow_only(keys::kTokenDist);
  d.kind = enum_field<sim::TokenDistKind>(*r, "distribution",
                                          {{"fixed", sim::TokenDistKind::kFixed},
                                           {"uniform", sim::TokenDistKind::kUniform},
                                           {"lognormal", sim::TokenDistKind::kLognormal}},
                                          true)
               .value_or(sim::TokenDistKind::kFixed);
  const bool fixed = d.kind == sim::TokenDistKind::kFixed;
  const bool logn = d.kind == sim::TokenDistKind::kLognormal;
  if (fixed)
    d.value = int_in(*r, "value", min_value, kMaxTokens, true).value_or(0);
  else if (r->has("value"))
    r->problem("value", "applies only to distribution \"fixed\"");
  if (!fixed) {
    d.min = int_in(*r, "min", min_value, kMaxTokens, !logn)
                .value_or(std::max<std::int64_t>(min_value, 1));
    d.max = int_in(*r, "max", min_value, kMaxTokens, !logn).value_or(kMaxTokens);
    if (d.min > d.max) r->problem("max", "must be >= min (" + std::to_string(d.min) + ")");
  } else {
    for (std::string_view k : {"min", "max"}) {
      if (r->has(k)) r->problem(k, "does not apply to distribution \"fixed\"");
    }
  }
  if (logn) {
    d.mean = number_in(*r, "mean", 0, static_cast<double>(kMaxTokens), true, true).value_or(1);
    d.cv = number_in(*r, "cv", 0, 100, true, true).value_or(1);
  } else {
    for (std::string_view k : {"mean", "cv"}) {
      if (r->has(k)) r->problem(k, "applies only to distribution \"lognormal\"");
    }
  }
  return d;
}

namespace {

sim::SharedPrefixSpec parse_shared_prefix(const Reader& r) {
  r.allow_only(keys::kSharedPrefix);
  sim::SharedPrefixSpec p;
  p.share = number_in(r, "share", 0, 1, false, true).value_or(0);
  p.groups = static_cast<int>(int_in(r, "groups", 1, 1'000'000, false).value_or(1));
  p.tokens = int_in(r, "tokens", 1, kMaxTokens, true).value_or(1);
  return p;
}

void read_trace(const Reader& w, sim::WorkloadSpec& s, LoadContext& ctx) {
  auto path = w.string("trace", true);
  TraceFormat format = TraceFormat::kAuto;
  if (auto f = w.string("trace_format", false)) {
    try {
      format = parse_trace_format(*f, "trace_format");
    } catch (const InputError& e) {
      w.problem("trace_format", std::string(e.what()).substr(std::string("trace_format: ").size()));
    }
  }
  s.time_scale = number_in(w, "time_scale", 0, 1e6, true, false).value_or(1.0);
  if (!path) return;
  s.trace_path = resolve_path(ctx, *path);
  try {
    s.trace = read_trace_file(s.trace_path, format).requests;
  } catch (const InputError& e) {
    // One problem per bad row: "file.csv:7: column ...".
    const std::string text = e.what();
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t end = text.find("\n  ", start);
      if (end == std::string::npos) end = text.size();
      w.problem("trace", text.substr(start, end - start));
      start = end + 3;
    }
  }
}

}  // namespace

sim::WorkloadSpec parse_workload(const Reader& w, LoadContext& ctx) {
  w.allow_only(keys::kWorkload);
  sim::WorkloadSpec s;
  s.arrival = enum_field<sim::ArrivalKind>(w, "arrival",
                                           {{"poisson", sim::ArrivalKind::kPoisson},
                                            {"gamma", sim::ArrivalKind::kGamma},
                                            {"trace", sim::ArrivalKind::kTrace}},
                                           true)
                  .value_or(sim::ArrivalKind::kPoisson);
  s.max_requests = int_in(w, "max_requests", 0, 1'000'000'000'000, false).value_or(0);
  if (s.arrival == sim::ArrivalKind::kTrace) {
    ctx.workload_uses_trace = true;
    for (std::string_view k : {"rate", "cv", "prompt_tokens", "output_tokens", "shared_prefix"}) {
      if (w.has(k)) w.problem(k, "does not apply to arrival \"trace\" (the trace gives it)");
    }
    read_trace(w, s, ctx);
    return s;
  }
  for (std::string_view k : {"trace", "trace_format", "time_scale"}) {
    if (w.has(k)) w.problem(k, "applies only to arrival \"trace\"");
  }
  if (auto p = w.object("shared_prefix", false)) s.shared_prefix = parse_shared_prefix(*p);
  s.rate_per_s = number_in(w, "rate", 0, 1e9, true, true).value_or(1);
  if (s.arrival == sim::ArrivalKind::kGamma) {
    s.cv = number_in(w, "cv", 0, 100, true, true).value_or(1);
  } else if (w.has("cv")) {
    w.problem("cv", "applies only to arrival \"gamma\" (poisson has cv 1)");
  }
  s.prompt_tokens = parse_token_dist(w, "prompt_tokens", 1);
  s.output_tokens = parse_token_dist(w, "output_tokens", 0);
  return s;
}

sim::ServingSpec parse_serving(const Reader& r) {
  r.allow_only(keys::kServing);
  sim::ServingSpec s;
  s.max_batch = static_cast<int>(int_in(r, "max_batch", 1, 65536, false).value_or(s.max_batch));
  s.kv_block_tokens = int_in(r, "kv_block_tokens", 1, 65536, false).value_or(s.kv_block_tokens);
  s.prefill_chunk_tokens = int_in(r, "prefill_chunk_tokens", 1, 1'048'576, false).value_or(0);
  if (auto c = r.object("prefix_cache", false)) {
    c->allow_only(keys::kPrefixCache);
    s.prefix_cache.enabled = c->boolean("enabled", false).value_or(true);
    s.prefix_cache.block_tokens =
        int_in(*c, "block_tokens", 1, 1'048'576, false).value_or(s.prefix_cache.block_tokens);
    s.prefix_cache.host_offload = c->boolean("host_offload", false).value_or(false);
    if (auto t = c->object("ssd_tier", false)) {
      t->allow_only(keys::kSsdTier);
      const auto capacity = positive_bytes(*t, "capacity", true);
      const auto read = positive_bandwidth(*t, "read_bandwidth", true);
      const auto write = positive_bandwidth(*t, "write_bandwidth", false);
      const bool write_ok = write || !t->has("write_bandwidth");
      if (capacity && read && write_ok)
        s.prefix_cache.ssd_tier =
            sim::PrefixCacheSpec::SsdTier{*capacity, *read, write.value_or(*read)};
      if (!s.prefix_cache.host_offload) {
        c->problem("ssd_tier",
                   "needs host_offload: true (blocks reach the SSD when the host tier "
                   "evicts them)");
      }
    }
    if (auto t = c->object("storage_tier", false)) {
      t->allow_only(keys::kStorageTier);
      if (auto node = t->string("node", true)) {
        s.prefix_cache.storage_tier = sim::PrefixCacheSpec::StorageTier{*node};
      }
      if (!s.prefix_cache.host_offload) {
        c->problem("storage_tier",
                   "needs host_offload: true (blocks reach the storage node when the node's "
                   "lowest tier evicts them)");
      }
    }
    // Cached blocks are whole paged blocks, so a hit frees exactly the blocks it reuses.
    if (s.prefix_cache.block_tokens % s.kv_block_tokens != 0) {
      c->problem("block_tokens", "must be a multiple of serving.kv_block_tokens (" +
                                     std::to_string(s.kv_block_tokens) + "), got " +
                                     std::to_string(s.prefix_cache.block_tokens));
    }
  }
  if (auto p = r.object("preemption", false)) {
    p->allow_only(keys::kPreemption);
    sim::PreemptionSpec pre;
    using Mode = sim::PreemptionSpec::Mode;
    pre.mode =
        enum_field<Mode>(*p, "mode", {{"recompute", Mode::kRecompute}, {"swap", Mode::kSwap}}, true)
            .value_or(pre.mode);
    pre.watermark = number_in(*p, "watermark", 0, 0.5, false, false).value_or(pre.watermark);
    s.preemption = pre;
  }
  return s;
}

}  // namespace kvshift::input::detail
