// Analytic sweeps over the closed forms (see analytic_sweep.hpp).
#include "sweep/analytic_sweep.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

#include "cost_model/input_error.hpp"
#include "cost_model/latency.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/omission_plan.hpp"
#include "cost_model/storage.hpp"
#include "cost_model/units.hpp"

namespace kvshift::sweep {
namespace {

const char* ranked_name(int i) {
  return cost_model::strategy_name(cost_model::kCrossoverStrategies[i]);
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Splits "LO..HI[:N]"; returns false for a list.
bool split_range(std::string_view text, std::string& lo, std::string& hi, long& n,
                 std::string_view flag) {
  const std::size_t dots = text.find("..");
  if (dots == std::string_view::npos) return false;
  lo = std::string(text.substr(0, dots));
  std::string_view rest = text.substr(dots + 2);
  n = -1;
  if (const std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string count(rest.substr(colon + 1));
    char* end = nullptr;
    n = std::strtol(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || n < 2 || n > static_cast<long>(kMaxAxisValues)) {
      throw InputError(std::string(flag) + ": the count after ':' must be an integer in [2, " +
                       std::to_string(kMaxAxisValues) + "] (got \"" + count + "\")");
    }
    rest = rest.substr(0, colon);
  }
  hi = std::string(rest);
  return true;
}

std::vector<double> log_space(double lo, double hi, long n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) {
    v[static_cast<std::size_t>(i)] =
        i == n - 1 ? hi
                   : lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(n - 1));
  }
  return v;
}

std::int64_t parse_int(const std::string& s, std::string_view flag) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') {
    throw InputError(std::string(flag) + ": expected an integer (got \"" + s + "\")");
  }
  return v;
}

// A bandwidth grid point: finite and > 0 (a 0 bandwidth has no transfer time to compare).
double positive_bandwidth(const std::string& text, std::string_view flag) {
  const double v = parse_bandwidth(text, flag).value;
  if (!(v > 0) || !std::isfinite(v)) {
    throw InputError(std::string(flag) + ": every bandwidth must be > 0 and finite (got \"" + text +
                     "\")");
  }
  return v;
}

std::string g9(double v) { return format_number("%.9g", v); }

struct Row {
  std::string crossover, winners, points;
};

Row evaluate_row(const AnalyticSetup& s, const AnalyticGrid& grid, int k, std::int64_t tokens,
                 bool with_points) {
  std::vector<int> groups;
  for (int g = 2; g < k + 2; ++g) groups.push_back(g);
  const cost_model::OmissionPlan topo =
      cost_model::OmissionPlan::from_groups(s.model.layers, groups);
  const cost_model::RooflineCosts compute(s.gpu);
  const cost_model::StorageReport storage =
      cost_model::storage(s.model, topo, tokens, {s.predictor_dtype, 1});
  // The sweep ranks full transfer, replay and RISK-KV; it does not price the hybrid split.
  const cost_model::LatencyOptions lo{
      .retention = s.retention, .predictor_dtype = s.predictor_dtype, .hybrid = false};
  Row row;
  const std::string prefix = std::to_string(k) + "," + std::to_string(tokens) + ",";
  int current = -1;
  double band_start = 0, previous = 0;
  auto close_band = [&] {
    if (current >= 0) {
      row.winners +=
          prefix + g9(band_start) + "," + g9(previous) + "," + ranked_name(current) + "\n";
    }
  };
  for (double b : grid.bandwidths_bps) {
    const cost_model::Path path{BitsPerSecond{b}, s.latency};
    const cost_model::LatencyReport r =
        cost_model::latency(s.model, topo, tokens, storage, path, s.gpu, compute, lo);
    if (row.crossover.empty()) {
      row.crossover = prefix + g9(storage.omitted_fraction) + "," +
                      std::to_string(storage.kv_saved.count) + "," +
                      (r.crossover_full ? g9(r.crossover_full->value) : "") + "," +
                      (r.crossover_replay ? g9(r.crossover_replay->value) : "") + "\n";
    }
    // In kCrossoverStrategies' order.
    std::array<double, std::size(cost_model::kCrossoverStrategies)> t{};
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = r.move.at(cost_model::kCrossoverStrategies[i]).value;
    }
    int best = 0;
    for (int i = 1; i < static_cast<int>(std::size(t)); ++i) best = t[i] < t[best] ? i : best;
    if (best != current) {
      close_band();
      current = best;
      band_start = b;
    }
    previous = b;
    if (with_points) {
      row.points += g9(b) + "," + prefix + g9(t[0]) + "," + g9(t[1]) + "," + g9(t[2]) + "," +
                    g9(r.move.at(cost_model::Strategy::kProxyKv).value) + "," + ranked_name(best) +
                    "\n";
    }
  }
  close_band();
  return row;
}

}  // namespace

std::vector<double> parse_bandwidth_grid(std::string_view text, std::string_view flag) {
  std::string lo, hi;
  long n = 0;
  std::vector<double> v;
  if (split_range(text, lo, hi, n, flag)) {
    const double a = positive_bandwidth(lo, flag), b = positive_bandwidth(hi, flag);
    if (!(a < b))
      throw InputError(std::string(flag) + ": LO must be below HI (got \"" + std::string(text) +
                       "\")");
    v = log_space(a, b, n < 0 ? 50 : n);
  } else {
    for (const std::string& item : split_list(text)) v.push_back(positive_bandwidth(item, flag));
    std::sort(v.begin(), v.end());
  }
  return v;
}

std::vector<std::int64_t> parse_token_grid(std::string_view text, std::string_view flag) {
  std::string lo, hi;
  long n = 0;
  std::vector<std::int64_t> v;
  if (split_range(text, lo, hi, n, flag)) {
    const std::int64_t a = parse_int(lo, flag), b = parse_int(hi, flag);
    if (a < 1 || !(a < b)) {
      throw InputError(std::string(flag) + ": need 1 <= LO < HI (got \"" + std::string(text) +
                       "\")");
    }
    for (double x : log_space(static_cast<double>(a), static_cast<double>(b), n < 0 ? 50 : n)) {
      v.push_back(std::llround(x));
    }
  } else {
    for (const std::string& item : split_list(text)) {
      v.push_back(parse_int(item, flag));
      if (v.back() < 1)
        throw InputError(std::string(flag) + ": token counts must be >= 1 (got " + item + ")");
    }
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<int> parse_int_grid(std::string_view text, std::string_view flag) {
  std::string lo, hi;
  long n = 0;
  std::vector<int> v;
  if (split_range(text, lo, hi, n, flag)) {
    if (n >= 0) throw InputError(std::string(flag) + ": takes LO..HI without a count");
    const std::int64_t a = parse_int(lo, flag), b = parse_int(hi, flag);
    if (a < 0 || a > b || b - a >= static_cast<std::int64_t>(kMaxAxisValues)) {
      throw InputError(std::string(flag) + ": need 0 <= LO <= HI with at most " +
                       std::to_string(kMaxAxisValues) + " values (got \"" + std::string(text) +
                       "\")");
    }
    for (std::int64_t i = a; i <= b; ++i) v.push_back(static_cast<int>(i));
  } else {
    for (const std::string& item : split_list(text)) {
      const std::int64_t k = parse_int(item, flag);
      if (k < 0 || k > std::numeric_limits<int>::max())
        throw InputError(std::string(flag) + ": group counts must be >= 0 (got " + item + ")");
      v.push_back(static_cast<int>(k));
    }
  }
  return v;
}

AnalyticResult run_analytic(const AnalyticSetup& setup, const AnalyticGrid& grid, int jobs,
                            bool with_points) {
  const int groups = (setup.model.layers + 1) / 2;
  for (int k : grid.omitted_groups) {
    if (k < 0 || k > groups - 2) {
      throw InputError("--omit: " + setup.model.name + " has " + std::to_string(groups) +
                       " groups, so 0.." + std::to_string(groups - 2) +
                       " can be omitted between G1 and the last group (got " + std::to_string(k) +
                       ")");
    }
  }
  const std::size_t nt = grid.tokens.size(), nrows = grid.omitted_groups.size() * nt;
  const double points =
      static_cast<double>(nrows) * static_cast<double>(grid.bandwidths_bps.size());
  if (points > static_cast<double>(kMaxAnalyticPoints) || nrows > kMaxAxisValues) {
    throw InputError("--bandwidth/--tokens/--omit: " + g9(std::round(points)) + " points (" +
                     std::to_string(grid.bandwidths_bps.size()) + " bandwidths x " +
                     std::to_string(nt) + " context lengths x " +
                     std::to_string(grid.omitted_groups.size()) +
                     " omitted-group counts) is more than an analytic sweep evaluates (at most " +
                     std::to_string(kMaxAnalyticPoints) + " points and " +
                     std::to_string(kMaxAxisValues) + " context x group rows); use fewer values");
  }
  std::vector<Row> rows(nrows);
  {
    boost::asio::thread_pool pool(static_cast<std::size_t>(std::max(jobs, 1)));
    for (std::size_t i = 0; i < nrows; ++i) {
      boost::asio::post(pool, [&, i] {
        rows[i] = evaluate_row(setup, grid, grid.omitted_groups[i / nt], grid.tokens[i % nt],
                               with_points);
      });
    }
    pool.join();
  }
  AnalyticResult out;
  out.points = nrows * grid.bandwidths_bps.size();
  out.crossover_csv =
      "omitted_groups,tokens,omitted_share,kv_saved_bytes,crossover_full_bps,crossover_replay_"
      "bps\n";
  out.winners_csv = "omitted_groups,tokens,bandwidth_from_bps,bandwidth_to_bps,winner\n";
  if (with_points) {
    out.points_csv =
        "bandwidth_bps,omitted_groups,tokens,full_kv_s,token_replay_s,risk_kv_s,"
        "proxy_kv_s,winner\n";
  }
  for (Row& r : rows) {
    out.crossover_csv += r.crossover;
    out.winners_csv += r.winners;
    out.points_csv += r.points;
  }
  return out;
}

}  // namespace kvshift::sweep
