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

TableCosts::TableCosts(std::string model, int measured_groups, std::vector<CostTableEntry> entries,
                       const ComputeCosts* fallback)
    : model_(std::move(model)),
      measured_groups_(measured_groups),
      entries_(std::move(entries)),
      fallback_(fallback) {
  for (const auto& e : entries_) {
    if (e.tokens <= 0 || e.sharing <= 0 || !(e.median_s > 0) || !std::isfinite(e.median_s)) {
      throw InputError("cost table: entry " + e.op + " needs tokens, sharing and median_s > 0");
    }
  }
}

bool TableCosts::has(const std::string& op) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.op == op; });
}

double TableCosts::interpolate(const std::string& op, std::int64_t tokens,
                               std::int64_t sharing) const {
  if (tokens <= 0 || sharing <= 0) throw InputError("cost table: tokens and sharing must be > 0");
  std::map<std::int64_t, std::vector<std::pair<double, double>>> by_sharing;
  for (const auto& e : entries_) {
    if (e.op == op) by_sharing[e.sharing].push_back({double(e.tokens), e.median_s});
  }
  if (by_sharing.empty()) throw InputError("cost table has no \"" + op + "\" entries");
  std::vector<std::pair<double, double>> along_n;
  for (auto& [n, pts] : by_sharing) {
    std::sort(pts.begin(), pts.end());
    // Extrapolating far outside the table can overflow; keep it finite so the
    // second interpolation never sees inf - inf.
    const double y = interpolate_log_log(pts, double(tokens));
    along_n.push_back({double(n), std::clamp(y, std::numeric_limits<double>::min(),
                                             std::numeric_limits<double>::max())});
  }
  return interpolate_log_log(along_n, double(sharing));
}

void TableCosts::check_model(const ModelSpec& m) const {
  if (!same_name(m.name, model_)) {
    throw InputError("cost table was measured for model \"" + model_ + "\", not \"" + m.name +
                     "\"");
  }
}

Seconds TableCosts::prefill(const ModelSpec& m, std::int64_t tokens) const {
  check_model(m);
  return Seconds{interpolate("prefill", tokens, 1)};
}

Seconds TableCosts::decode_step(const ModelSpec& m, std::int64_t batch,
                                std::int64_t context_tokens) const {
  if (!fallback_) {
    throw InputError("cost table has no decode-step entries and no fallback cost model was given");
  }
  return fallback_->decode_step(m, batch, context_tokens);
}

Seconds TableCosts::reconstruct(const ModelSpec& m, const Topology& t, std::int64_t tokens,
                                std::int64_t requests, DType /*predictor_dtype*/) const {
  check_model(m);
  if (t.empty()) return Seconds{0.0};
  if (measured_groups_ <= 0) throw InputError("cost table: reconstruction measured for no groups");
  const double scale = static_cast<double>(t.groups().size()) / measured_groups_;
  return Seconds{scale * interpolate("reconstruct", tokens, requests)};
}

}  // namespace kvshift::cost_model
