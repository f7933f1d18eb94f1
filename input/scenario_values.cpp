// Typed-value helpers shared by the scenario section parsers: ranges, units
// with a sign constraint, path resolution, and the "got" text of a value.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {

std::string got(const Reader& r, std::string_view key) {
  if (!r.node().is_object()) return "?";
  auto it = r.node().find(key);
  if (it == r.node().end()) return "nothing";
  std::string s = it->dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string closest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = 3;  // suggest only within edit distance 2
  for (const std::string& n : names) {
    std::vector<std::size_t> prev(n.size() + 1), cur(n.size() + 1);
    for (std::size_t j = 0; j <= n.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= n.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] != n[j - 1])});
      }
      std::swap(prev, cur);
    }
    // Short names: a suggestion must share at least half of the word.
    if (prev[n.size()] < best_d && 2 * prev[n.size()] <= word.size()) {
      best_d = prev[n.size()];
      best = n;
    }
  }
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

std::optional<std::string> not_a_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return path + ": cannot open file";
  if (!std::filesystem::is_regular_file(path, ec)) return path + ": not a regular file";
  return std::nullopt;
}

std::string input_file(const LoadContext& ctx, const std::string& path, bool config_folder) {
  std::string p = resolve_path(ctx, path);
  std::error_code ec;
  if (config_folder && std::filesystem::is_directory(p, ec)) {
    p = (std::filesystem::path(p) / "config.json").string();
  }
  if (auto why = not_a_file(p)) throw InputError(*why);
  return p;
}

std::string resolve_path(const LoadContext& ctx, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || ctx.base_dir.empty()) return p.lexically_normal().string();
  return (ctx.base_dir / p).lexically_normal().string();
}

bool integral_float_out_of_range(const Reader& r, std::string_view key) {
  if (!r.node().is_object()) return false;
  auto it = r.node().find(key);
  if (it == r.node().end() || !it->is_number_float()) return false;
  const double d = it->get<double>();
  // Reader::integer casts integral floats to int64; keep values it cannot hold away from it.
  return d == std::floor(d) && !(std::fabs(d) < 9.2e18);
}

std::optional<std::int64_t> int_in(const Reader& r, std::string_view key, std::int64_t lo,
                                   std::int64_t hi, bool required) {
  if (integral_float_out_of_range(r, key)) {
    r.problem(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                       got(r, key) + ")");
    return std::nullopt;
  }
  auto v = r.integer(key, required);
  if (!v) return std::nullopt;
  if (*v < lo || *v > hi) {
    r.problem(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                       std::to_string(*v) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<double> number_in(const Reader& r, std::string_view key, double lo, double hi,
                                bool lo_open, bool required) {
  auto v = r.number(key, required);
  if (!v) return std::nullopt;
  const bool low_ok = lo_open ? *v > lo : *v >= lo;
  if (!low_ok || !(*v <= hi) || !std::isfinite(*v)) {
    const std::string low = std::string(lo_open ? "> " : ">= ") + format_g(lo);
    const std::string rule = hi >= 1e6 ? low : low + " and <= " + format_g(hi);
    r.problem(key, "must be " + rule + " (got " + got(r, key) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<BitsPerSecond> positive_bandwidth(const Reader& r, std::string_view key,
                                                bool required) {
  auto v = r.bandwidth(key, required);
  if (v && !(v->value > 0)) {
    r.problem(key, "must be > 0 (got " + got(r, key) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<Seconds> duration_at_least0(const Reader& r, std::string_view key, bool strict,
                                          bool required) {
  auto v = r.duration(key, required);
  if (v && strict && !(v->value > 0)) {
    r.problem(key, "must be > 0 (got " + got(r, key) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<Bytes> positive_bytes(const Reader& r, std::string_view key, bool required) {
  auto v = r.bytes(key, required);
  if (v && v->count <= 0) {
    r.problem(key, "must be > 0 (got " + got(r, key) + ")");
    return std::nullopt;
  }
  return v;
}

}  // namespace kvshift::input::detail
