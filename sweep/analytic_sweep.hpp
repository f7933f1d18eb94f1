// Cost-model-only sweeps (`kvshift sweep --analytic`): the closed forms of
// cost_model (storage() once per context length and omitted-group count,
// latency() per bandwidth) over a grid of bandwidth x context length x
// omitted groups, with no simulation. Omitting k groups means groups
// G2..G(k+1) (contiguous, anchored on G1 and G(k+2)); k = 0 is plain full KV.
// The winner of a cell is the fastest of full_kv, token_replay and risk_kv
// (predictors resident) - ProxyKV is lossy in another way and is reported
// but not ranked. Outputs: crossover.csv (closed-form crossover bandwidths per
// row), winners.csv (runs of equal winner along the bandwidth axis: the
// crossover map in compact form) and, when small enough, analytic.csv with
// every point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/units.hpp"

namespace kvshift::sweep {

/// The most values one axis may take (--bandwidth LO..HI:N, --tokens, --omit).
inline constexpr std::size_t kMaxAxisValues = 1000000;
/// The most points one analytic sweep evaluates (about a minute on a few cores).
inline constexpr std::uint64_t kMaxAnalyticPoints = 100000000;

struct AnalyticGrid {
  std::vector<double> bandwidths_bps;  ///< ascending
  std::vector<std::int64_t> tokens;    ///< ascending, distinct
  std::vector<int> omitted_groups;     ///< group counts k
};

struct AnalyticSetup {
  cost_model::ModelSpec model;
  cost_model::GpuSpec gpu;
  Seconds latency{100e-6};  ///< one-way path latency
  cost_model::DType predictor_dtype = cost_model::DType::kF32;
  double retention = 0.5;  ///< ProxyKV ρ
};

struct AnalyticResult {
  std::uint64_t points = 0;
  std::string crossover_csv;
  std::string winners_csv;
  std::string points_csv;  ///< empty unless asked for
};

/// "LO..HI:N" (N log-spaced values, ends included) or "v1,v2,..." of bandwidths, each > 0 and
/// finite (InputError naming `flag` otherwise).
std::vector<double> parse_bandwidth_grid(std::string_view text, std::string_view flag);
/// "LO..HI:N" (log-spaced, rounded, duplicates dropped) or "v1,v2,..." of token counts.
std::vector<std::int64_t> parse_token_grid(std::string_view text, std::string_view flag);
/// "LO..HI" (every integer) or "k1,k2,...".
std::vector<int> parse_int_grid(std::string_view text, std::string_view flag);

/// Evaluates the grid on `jobs` threads; `with_points` also fills points_csv.
/// Throws InputError for a k the model cannot omit and for a grid above kMaxAnalyticPoints.
AnalyticResult run_analytic(const AnalyticSetup& setup, const AnalyticGrid& grid, int jobs,
                            bool with_points);

}  // namespace kvshift::sweep
