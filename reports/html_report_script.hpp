// The script report.html runs: it draws the JSON chart definitions write_html_report embeds
// (Chart.js for line and bar charts, plain canvases for heat maps) and marks in
// #kvshift-status whether every chart drew ("charts-ok N" or "charts-failed: why").
#pragma once

namespace kvshift::reports {

extern const char* const kPageScript;

}  // namespace kvshift::reports
