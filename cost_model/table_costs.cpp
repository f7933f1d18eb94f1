// Cost-table interpolation; see table_costs.hpp.
#include "cost_model/table_costs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

bool same_name(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

double interpolate_log_log(const std::vector<std::pair<double, double>>& p, double x) {
  if (p.empty()) throw InputError("cost table: no points to interpolate");
  if (p.size() == 1) return p[0].second * x / p[0].first;
  std::size_t i = 0;  // segment [i, i+1]
  while (i + 2 < p.size() && x > p[i + 1].first) ++i;
  const double lx0 = std::log(p[i].first), lx1 = std::log(p[i + 1].first);
  const double ly0 = std::log(p[i].second), ly1 = std::log(p[i + 1].second);
  return std::exp(ly0 + (std::log(x) - lx0) * (ly1 - ly0) / (lx1 - lx0));
}

double worst_spread(const std::vector<CostTableEntry>& rows) {
  double worst = 0;
  for (const auto& e : rows) worst = std::max(worst, (e.p90_s - e.p10_s) / e.median_s);
  return worst;
}

TableCosts::TableCosts(TableInfo info, std::vector<CostTableEntry> entries,
                       const ComputeCosts* fallback)
    : info_(std::move(info)), entries_(std::move(entries)), fallback_(fallback) {
  for (const auto& e : entries_) {
    if (e.tokens <= 0 || e.sharing <= 0 || e.batch <= 0 || !(e.median_s > 0) ||
        !std::isfinite(e.median_s)) {
      throw InputError("cost table: entry " + e.op +
                       " needs tokens, sharing, batch and median_s > 0");
    }
  }
}

bool TableCosts::has(const std::string& op) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.op == op; });
}

double TableCosts::interpolate(const std::string& op, std::int64_t tokens,
                               std::int64_t second) const {
  if (tokens <= 0 || second <= 0) throw InputError("cost table: tokens and sharing must be > 0");
  std::map<std::int64_t, std::vector<std::pair<double, double>>> by_second;
  for (const auto& e : entries_) {
    if (e.op == op)
      by_second[op == "decode" ? e.batch : e.sharing].push_back({double(e.tokens), e.median_s});
  }
  if (by_second.empty()) throw InputError("cost table has no \"" + op + "\" entries");
  std::vector<std::pair<double, double>> along;
  for (auto& [n, pts] : by_second) {
    std::sort(pts.begin(), pts.end());
    // Extrapolating far outside the table can overflow; keep it finite so the
    // second interpolation never sees inf - inf.
    const double y = interpolate_log_log(pts, double(tokens));
    along.push_back({double(n), std::clamp(y, std::numeric_limits<double>::min(),
                                           std::numeric_limits<double>::max())});
  }
  return interpolate_log_log(along, double(second));
}

void TableCosts::check_model(const ModelSpec& m) const {
  if (!same_name(m.name, info_.model)) {
    throw InputError("cost table was measured for model \"" + info_.model + "\", not \"" + m.name +
                     "\"");
  }
}

const ComputeCosts& TableCosts::fallback(const std::string& op) const {
  if (!fallback_) {
    throw InputError("cost table has no \"" + op +
                     "\" entries and no fallback cost model was given");
  }
  return *fallback_;
}

Seconds TableCosts::prefill(const ModelSpec& m, std::int64_t tokens) const {
  check_model(m);
  if (!has("prefill")) return fallback("prefill").prefill(m, tokens);
  return Seconds{interpolate("prefill", tokens, 1)};
}

Seconds TableCosts::extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const {
  check_model(m);
  if (!has("prefill")) return fallback("prefill").extend(m, prefix, tokens);
  return ComputeCosts::extend(m, prefix, tokens);
}

Seconds TableCosts::decode_step(const ModelSpec& m, std::int64_t batch,
                                std::int64_t context_tokens) const {
  check_model(m);
  if (!has("decode")) return fallback("decode").decode_step(m, batch, context_tokens);
  const std::int64_t per_request =
      std::max<std::int64_t>(1, context_tokens / std::max<std::int64_t>(batch, 1));
  return Seconds{interpolate("decode", per_request, std::max<std::int64_t>(batch, 1))};
}

Seconds TableCosts::reconstruct(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                                std::int64_t requests, DType predictor_dtype) const {
  check_model(m);
  if (t.empty()) return Seconds{0.0};
  if (!has("reconstruct")) {
    return fallback("reconstruct").reconstruct(m, t, tokens, requests, predictor_dtype);
  }
  if (info_.measured_groups <= 0) {
    throw InputError("cost table: reconstruction measured for no groups");
  }
  const double scale = static_cast<double>(t.groups().size()) / info_.measured_groups;
  return Seconds{scale * interpolate("reconstruct", tokens, requests)};
}

Seconds TableCosts::proxy_score(const ModelSpec& proxy, const ModelSpec& target,
                                std::int64_t tokens) const {
  check_model(target);
  if (!has("proxy_score")) return fallback("proxy_score").proxy_score(proxy, target, tokens);
  if (info_.proxy && !same_name(*info_.proxy, proxy.name)) {
    throw InputError("cost table's proxy_score was measured with proxy \"" + *info_.proxy +
                     "\", not \"" + proxy.name + "\"");
  }
  return Seconds{interpolate("proxy_score", tokens, 1)};
}

Seconds TableCosts::prune(const ModelSpec& m, std::int64_t tokens, double retention) const {
  check_model(m);
  if (!has("prune")) return fallback("prune").prune(m, tokens, retention);
  const double scale = info_.retention ? (1.0 + retention) / (1.0 + *info_.retention) : 1.0;
  return Seconds{scale * interpolate("prune", tokens, 1)};
}

std::vector<OpSource> TableCosts::sources() const {
  std::vector<OpSource> out;
  const std::vector<OpSource> behind = fallback_ ? fallback_->sources() : std::vector<OpSource>{};
  for (const std::string& op : compute_ops()) {
    std::vector<CostTableEntry> rows;
    for (const auto& e : entries_) {
      if (e.op == op) rows.push_back(e);
    }
    if (!rows.empty()) {
      auto note = info_.notes.find(op);
      out.push_back(
          {op, "table " + info_.origin + (note != info_.notes.end() ? "; " + note->second : ""), 0,
           worst_spread(rows)});
      continue;
    }
    auto it = std::find_if(behind.begin(), behind.end(), [&](const auto& s) { return s.op == op; });
    out.push_back({op,
                   (it != behind.end() ? it->source : std::string("none")) + " (the table has no " +
                       op + " rows)",
                   it != behind.end() ? it->measurements : 0, it != behind.end() ? it->spread : 0});
  }
  return out;
}

}  // namespace kvshift::cost_model
