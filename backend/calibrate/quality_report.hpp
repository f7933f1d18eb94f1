// What `kvshift quality` writes, built from a QualityResult: quality.json (the
// measured rows; scenarios read a proxy_kv row's ΔNLL from it), quality.md (a
// table per ratio: methods side by side, with intervals) and quality.svg
// (ΔNLL vs ρ per method, 95 % intervals as bars). Pure text builders; the
// command writes the files atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backend/calibrate/quality.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend::calibrate {

/// Run facts that are not part of the measurement.
struct QualityRunInfo {
  std::string model_path;
  std::string corpus_path;
  std::int64_t corpus_tokens = 0;
  std::string proxy_name;  ///< the proxy of proxykv policies ("" when none)
  double wall_time_s = 0.0;
};

/// One sentence: at the headline ratio (0.5, or the one nearest it), the non-oracle method that
/// loses least and whether its lead is clear of every other by a paired 95 % CI, and each
/// ProxyKV row's share of KVZip's quality recovered; with no ratio, the exact NLL.
std::string quality_headline(const QualityResult& r);

/// quality.json ("format": "kvshift-quality", "version": 1).
nlohmann::json quality_json(const QualityResult& r, const cost_model::ModelSpec& spec,
                            const QualityRunInfo& info);

/// quality.md.
std::string quality_markdown(const QualityResult& r, const cost_model::ModelSpec& spec,
                             const QualityRunInfo& info);

/// quality.svg: mean ΔNLL (y) vs retention ρ (x), one line per pruning method, CI bars.
std::string quality_svg(const QualityResult& r, const cost_model::ModelSpec& spec);

}  // namespace kvshift::backend::calibrate
