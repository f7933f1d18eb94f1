// report.html: one self-contained page for a run folder (summary.json, with
// each strategy's busiest-link series, and recoveries.csv), a sweep folder (sweep.csv) or an
// analytic sweep folder (winners.csv), whichever of them DIR holds. Charts are drawn by Chart.js
// (Debian's libjs-chart.js UMD bundle, inlined so the page opens offline); heat maps, which
// Chart.js lacks, are drawn as rectangles on a plain canvas. When every chart has drawn marks the
// page writes `charts-ok N` into #kvshift-status (and `charts-failed: ...` otherwise), so a
// headless browser can check it. Reads only what the folder holds; the page is a pure function of
// those files and the Chart.js bundle.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace kvshift::reports {

/// The Chart.js UMD bundle: $KVSHIFT_CHARTJS, else Debian's
/// /usr/share/javascript/chart.js/chart.min.js. Throws std::runtime_error when missing.
std::string load_chart_js();

/// Everything the page plots, gathered from `dir` (throws InputError when it holds nothing to
/// report).
nlohmann::json report_data(const std::filesystem::path& dir);

/// The page for `data` with `chart_js` inlined.
std::string render_html_report(const nlohmann::json& data, const std::string& chart_js);

/// Writes dir/report.html atomically and returns its path.
std::filesystem::path write_html_report(const std::filesystem::path& dir);

}  // namespace kvshift::reports
