// Internal to the scenario loader: one parse function per section (pass one)
// and the cross-reference pass (pass two), with the small typed-value helpers
// they share. Not for use outside input/.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "input/json_reader.hpp"
#include "input/scenario_spec.hpp"

namespace kvshift::input::detail {

/// Shared state of one load.
struct LoadContext {
  std::filesystem::path base_dir;
  std::size_t generated_nodes = 0;  ///< cluster.nodes[0, generated_nodes) come from a generator
  std::string generator_pointer;    ///< e.g. "/cluster/leaf_spine"
  std::vector<std::string> link_pointers;  ///< per cluster link: the JSON that declared it
  std::vector<std::string> hbm_origin;     ///< per cluster node: the pointer its HBM size came from
  std::vector<std::size_t> event_order;    ///< spec.events[i] came from /events/event_order[i]
  bool workload_uses_trace = false;
};

/// The raw JSON of `key` shortened for messages, e.g. "\"-5Mbps\"".
std::string got(const Reader& r, std::string_view key);
/// Why `path` cannot be read as an input file (missing, a folder, a device), or nullopt.
std::optional<std::string> not_a_file(const std::string& path);
/// Resolves an input file path and checks it is a regular file (a folder holding config.json
/// when `config_folder`); throws InputError otherwise, so devices and folders are never read.
std::string input_file(const LoadContext& ctx, const std::string& path, bool config_folder);
/// Resolves `path` against the scenario's folder (absolute paths unchanged).
std::string resolve_path(const LoadContext& ctx, const std::string& path);

/// " (did you mean \"x\"?)" for the name closest to `word` within edit distance 2, or "".
/// (Reader's did_you_mean takes a fixed key list; node and link names are runtime data.)
std::string closest_name(const std::string& word, const std::vector<std::string>& names);
/// Reads an enum written as a string; the problem lists the allowed names (and a did-you-mean).
template <class E>
std::optional<E> enum_field(const Reader& r, std::string_view key,
                            std::span<const std::pair<std::string_view, E>> table, bool required) {
  auto s = r.string(key, required);
  if (!s) return std::nullopt;
  std::string names;
  std::vector<std::string> all;
  for (const auto& [name, value] : table) {
    if (name == *s) return value;
    names += (names.empty() ? "\"" : ", \"") + std::string(name) + "\"";
    all.emplace_back(name);
  }
  const std::string msg =
      "expected one of " + names + " (got \"" + *s + "\")" + closest_name(*s, all);
  r.problem(key, msg);
  return std::nullopt;
}
template <class E>
std::optional<E> enum_field(const Reader& r, std::string_view key,
                            std::initializer_list<std::pair<std::string_view, E>> table,
                            bool required) {
  return enum_field(r, key, std::span(table.begin(), table.size()), required);
}

/// True when `key` holds an integral float too large for int64 (Reader::integer must not see it).
bool integral_float_out_of_range(const Reader& r, std::string_view key);
/// Integer in [lo, hi]; out-of-range values are a problem naming the range.
std::optional<std::int64_t> int_in(const Reader& r, std::string_view key, std::int64_t lo,
                                   std::int64_t hi, bool required);
/// Number in [lo, hi] (or (lo, hi] when lo_open).
std::optional<double> number_in(const Reader& r, std::string_view key, double lo, double hi,
                                bool lo_open, bool required);
/// Bandwidth > 0.
std::optional<BitsPerSecond> positive_bandwidth(const Reader& r, std::string_view key,
                                                bool required);
/// Duration >= 0 (or > 0 when strict).
std::optional<Seconds> duration_at_least0(const Reader& r, std::string_view key, bool strict,
                                          bool required);
/// Bytes > 0.
std::optional<Bytes> positive_bytes(const Reader& r, std::string_view key, bool required);

// Pass one: each section (the Reader points at the section's value).
cost_model::ModelSpec parse_model(const Reader& top, LoadContext& ctx);
cost_model::GpuSpec parse_gpu(const Reader& top, LoadContext& ctx);
sim::ClusterSpec parse_cluster(const Reader& r, const cost_model::GpuSpec& gpu, LoadContext& ctx);
/// "ecmp" of `r`: true | false | {"seed": N} (N >= 0; true means seed 0); empty when absent
/// or false.
std::optional<std::uint64_t> parse_ecmp(const Reader& r);
sim::WorkloadSpec parse_workload(const Reader& r, LoadContext& ctx);
/// A token-length distribution at `key` of `r`: a number (fixed) or an object; at least
/// `min_value` tokens.
sim::TokenDist parse_token_dist(const Reader& r, std::string_view key, std::int64_t min_value);
sim::ServingSpec parse_serving(const Reader& r);
sim::ProtectionSpec parse_protection(const Reader& r);
std::vector<sim::EventSpec> parse_events(const Reader& top, LoadContext& ctx);
sim::PolicySpec parse_policies(const Reader& r);
std::optional<sim::RiskKvSpec> parse_risk_kv(const Reader& top, const cost_model::ModelSpec& m,
                                             bool model_ok, LoadContext& ctx);
std::optional<sim::ProxyKvSpec> parse_proxy_kv(const Reader& top, LoadContext& ctx);
sim::PredictorSpec parse_predictors(const Reader& r);
/// A "router" field (policies, pools).
std::optional<sim::Router> parse_router(const Reader& r, bool required);
/// Pools (after the cluster, policies and cost source): also sets each gpu node's pool.
std::vector<sim::PoolSpec> parse_pools(const Reader& top, ScenarioSpec& s, LoadContext& ctx);
/// Deployments (after pools, cost source and workload): sets spec.deployments (and the
/// first one's model and methods as the scenario's), and resolves trace requests' models.
void parse_deployments(const Reader& top, ScenarioSpec& s, LoadContext& ctx);
sim::TransferEngineSpec parse_transfer_engine(const Reader& r);
CostSourceSpec parse_cost_source(const Reader& top, LoadContext& ctx);
/// A profile cost table must exist, parse, match the model and hold the ops the scenario needs.
void check_cost_table(const Reader& top, const ScenarioSpec& spec);
/// The live section against the scenario: the folder runs its model, the methods it uses
/// have their predictors and mapper.
void check_live(const Reader& top, const ScenarioSpec& spec);
SloSpec parse_slo(const Reader& r);
/// outputs: the files a run writes, and the simulated link_sample_interval.
void parse_outputs(const Reader& r, ScenarioSpec& s);

/// Whether `node` runs deployment `m`'s model: one of its pools' GPU nodes (every node when
/// the scenario serves one model).
bool serves(const ScenarioSpec& s, const sim::DeploymentSpec& m, const sim::ClusterNode& node);
/// Pass two, methods of one deployment (sim::served_deployments): strategies and protection
/// have its sections; quality budget; proxy model.
void check_methods(const ScenarioSpec& s, const sim::DeploymentSpec& m, Diagnostics& d);
/// Pass two, placements: replica store, proxy GPUs, predictor source and `m`'s budget.
void check_placements(const ScenarioSpec& s, const sim::DeploymentSpec& m, Diagnostics& d);

/// `name` can name an output folder: not empty, no path separators, no control characters.
void check_scenario_name(const Reader& top, const std::string& name);
/// The run fits in memory: expected arrivals and link samples under kMaxArrivals and
/// kMaxLinkSamples (input/scenario_limits.cpp), each problem naming its field and estimate;
/// trace requests arriving after the duration are added to s.notes.
void check_run_size(const Reader& top, ScenarioSpec& s);
/// Generated prompts must fit the model's context (max_position_embeddings); prompt + output
/// beyond it, or trace requests beyond it, are added to s.notes.
void check_context(const Reader& top, ScenarioSpec& s, const LoadContext& ctx);

/// Pass two: cross-references. `top` is the document root (for pointers only).
void cross_check(const ScenarioSpec& spec, const Reader& top, const LoadContext& ctx);
/// Node and link names are unique (a flows file's one cluster check; cross_check does more).
void check_cluster_names(const sim::ClusterSpec& cluster, Diagnostics& d, const LoadContext& ctx);

}  // namespace kvshift::input::detail
