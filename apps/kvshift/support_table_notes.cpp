#include "apps/kvshift/support_table_notes.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "backend/calibrate/profile_inputs.hpp"

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

/// A cost table with what a reader must know beside its numbers: the shapes asked beyond the
/// measured ones (extrapolated) and a model folder whose weights are no longer those measured.
/// Both are appended to the table ops' sources (console table and summary cost_sources).
class CheckedTableCosts final : public cost_model::ComputeCosts {
 public:
  CheckedTableCosts(std::shared_ptr<const cost_model::ComputeCosts> table,
                    std::shared_ptr<const void> keep_alive, const input::CostTable& info,
                    std::string provenance)
      : c_(std::move(table)),
        keep_alive_(std::move(keep_alive)),
        provenance_(std::move(provenance)) {
    for (std::size_t i = 0; i < kOps.size(); ++i) {
      for (const auto& e : info.entries) {
        if (e.op != kOps[i]) continue;
        measured_max_[i] = std::max(measured_max_[i], e.tokens);
      }
    }
  }
  Seconds prefill(const cost_model::ModelSpec& m, std::int64_t t) const override {
    note(kPrefill, t);
    return c_->prefill(m, t);
  }
  Seconds extend(const cost_model::ModelSpec& m, std::int64_t prefix,
                 std::int64_t t) const override {
    note(kPrefill, prefix + t);
    return c_->extend(m, prefix, t);
  }
  Seconds decode_step(const cost_model::ModelSpec& m, std::int64_t b,
                      std::int64_t n) const override {
    note(kDecode, std::max<std::int64_t>(1, n / std::max<std::int64_t>(b, 1)));
    return c_->decode_step(m, b, n);
  }
  Seconds reconstruct(const cost_model::ModelSpec& m, const cost_model::OmissionPlan& t,
                      std::int64_t tokens, std::int64_t n, cost_model::DType d) const override {
    if (!t.empty()) note(kReconstruct, tokens);
    return c_->reconstruct(m, t, tokens, n, d);
  }
  Seconds proxy_score(const cost_model::ModelSpec& p, const cost_model::ModelSpec& m,
                      std::int64_t t) const override {
    note(kProxyScore, t);
    return c_->proxy_score(p, m, t);
  }
  Seconds prune(const cost_model::ModelSpec& m, std::int64_t t, double rho) const override {
    note(kPrune, t);
    return c_->prune(m, t, rho);
  }
  std::vector<cost_model::OpSource> sources() const override {
    std::vector<cost_model::OpSource> out = c_->sources();
    for (cost_model::OpSource& s : out) {
      if (!s.source.starts_with("table ")) continue;  // the roofline behind the table
      const auto i =
          static_cast<std::size_t>(std::find(kOps.begin(), kOps.end(), s.op) - kOps.begin());
      if (i < kOps.size()) s.source += extrapolation(i);
      if (!provenance_.empty()) s.source += "; " + provenance_;
    }
    return out;
  }

 private:
  enum Op : std::size_t { kPrefill, kDecode, kReconstruct, kProxyScore, kPrune };
  static constexpr std::array<std::string_view, 5> kOps{"prefill", "decode", "reconstruct",
                                                        "proxy_score", "prune"};

  void note(Op op, std::int64_t tokens) const {
    std::int64_t seen = asked_max_[op].load(std::memory_order_relaxed);
    while (tokens > seen && !asked_max_[op].compare_exchange_weak(seen, tokens)) {
    }
  }

  /// "; prefill at 32,768 tokens extrapolated 4x past the largest measured (8,192)", or "".
  std::string extrapolation(std::size_t i) const {
    const std::int64_t hi = asked_max_[i].load();
    std::string out;
    char text[160];
    if (measured_max_[i] > 0 && hi > measured_max_[i]) {
      std::snprintf(text, sizeof text,
                    "; %s at %s tokens extrapolated %.3gx past the largest measured (%s)",
                    std::string(kOps[i]).c_str(), grouped(hi).c_str(),
                    static_cast<double>(hi) / static_cast<double>(measured_max_[i]),
                    grouped(measured_max_[i]).c_str());
      out += text;
    }
    return out;
  }

  static std::string grouped(std::int64_t v) {
    std::string s = std::to_string(v), out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
      out += s[i];
    }
    return out;
  }

  std::shared_ptr<const cost_model::ComputeCosts> c_;
  std::shared_ptr<const void> keep_alive_;
  std::string provenance_;
  std::array<std::int64_t, 5> measured_max_{};  ///< per op, the largest tokens measured
  mutable std::array<std::atomic<std::int64_t>, 5> asked_max_{};  ///< and asked in the run
};

/// The folder a table's recorded input path names, looked up from the working folder and
/// then beside the table and its parents (tables keep paths relative to where profile ran).
std::optional<fs::path> find_recorded(const std::string& recorded, const std::string& table) {
  std::error_code ec;
  if (recorded.empty()) return std::nullopt;
  if (fs::exists(recorded, ec)) return fs::path(recorded);
  for (fs::path dir = fs::absolute(table, ec).parent_path(); !dir.empty();
       dir = dir.parent_path()) {
    if (fs::exists(dir / recorded, ec)) return dir / recorded;
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

/// The digest of a model folder, computed once per process (hashing reads every weight).
std::string cached_digest(const fs::path& folder) {
  static std::mutex mutex;
  static std::map<std::string, std::string> cache;
  const std::lock_guard lock(mutex);
  const std::string key = fs::weakly_canonical(folder).string();
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, backend::calibrate::digest_path(key)).first;
  return it->second;
}

/// "" when the table's model weights are those on disk now (or cannot be found to check),
/// else a sentence that says they differ.
std::string model_provenance(const input::CostTable& table, const std::string& table_path) {
  const auto model = table.inputs.find("model");
  if (model == table.inputs.end() || model->second.digest.empty()) return "";
  const std::optional<fs::path> folder = find_recorded(model->second.path, table_path);
  if (!folder) return "";
  const std::string now = cached_digest(*folder);
  if (now == model->second.digest) return "";
  return "warning: measured on weights " + model->second.digest + " but " + folder->string() +
         " is now " + now + " (other weights: the timings may not be this model's)";
}

}  // namespace

std::unique_ptr<cost_model::ComputeCosts> checked_table_costs(
    std::shared_ptr<const cost_model::ComputeCosts> table, std::shared_ptr<const void> keep_alive,
    const input::CostTable& info, const std::string& path) {
  return std::make_unique<CheckedTableCosts>(std::move(table), std::move(keep_alive), info,
                                             model_provenance(info, path));
}

}  // namespace kvshift::app
