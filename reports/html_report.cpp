// report.html (see html_report.hpp): C++ gathers the folder's results into
// one JSON object of chart definitions; a small inline script hands them to
// Chart.js, draws heat maps on plain canvases and checks that each drew.
#include "reports/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "cost_model/move_plan.hpp"
#include "reports/atomic_file.hpp"
#include "reports/html_report_script.hpp"
#include "reports/strategy_metrics.hpp"
#include "util/csv.hpp"

namespace kvshift::reports {
namespace {

using nlohmann::json;

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int col(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
};

Csv read_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  Csv csv;
  // Leading '#' lines are notes.
  while (in.peek() == '#') in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  util::read_csv_record(in, csv.header);
  for (std::vector<std::string> row; util::read_csv_record(in, row);) {
    if (row.size() > 1 || !row[0].empty()) csv.rows.push_back(std::move(row));
  }
  return csv;
}

double num(const std::string& s) { return s.empty() ? NAN : std::strtod(s.c_str(), nullptr); }

json chart(const std::string& title, const std::string& type, json data, const std::string& x_title,
           const std::string& y_title, const std::string& x_type = "category",
           bool stacked = false) {
  return {{"title", title},    {"type", type},    {"data", std::move(data)}, {"xTitle", x_title},
          {"yTitle", y_title}, {"xType", x_type}, {"stacked", stacked}};
}

json xy_dataset(const std::string& label, const std::vector<std::pair<double, double>>& pts,
                bool stepped = false) {
  json data = json::array();
  for (const auto& [x, y] : pts) data.push_back({{"x", x}, {"y", y}});
  return {{"label", label}, {"data", data}, {"stepped", stepped}, {"pointRadius", 0}};
}

// Recovery and migration latency CDFs from recoveries.csv: finished moves, and unfinished ones
// at their lower bound (as the summary counts them).
void latency_cdfs(const std::filesystem::path& file, json& charts, json& notes) {
  const Csv csv = read_csv(file);
  const int run = csv.col("strategy_run"), trig = csv.col("trigger"), lat = csv.col("latency_s"),
            outcome = csv.col("outcome");
  std::map<std::string, std::map<std::string, std::vector<double>>> by;  // kind -> strategy
  for (const auto& r : csv.rows) {
    if (run < 0 || lat < 0 || outcome < 0 || r.size() != csv.header.size()) continue;
    if (r[outcome] != "done" && r[outcome] != "unfinished") continue;
    by[r[trig] == "failure" ? "recovery" : "migration"][r[run]].push_back(num(r[lat]));
  }
  for (const char* kind : {"recovery", "migration"}) {
    json sets = json::array();
    std::vector<std::string> thin;
    for (auto& [name, v] : by[kind]) {
      if (v.size() < 2) {  // one point draws no line: say so instead
        thin.push_back(name + " (" + std::to_string(v.size()) + ")");
        continue;
      }
      std::sort(v.begin(), v.end());
      std::vector<std::pair<double, double>> pts;
      for (std::size_t i = 0; i < v.size(); ++i)
        pts.emplace_back(v[i], double(i + 1) / double(v.size()));
      sets.push_back(xy_dataset(name, pts, true));
    }
    const std::string label = kind;
    const std::string plural = kind[0] == 'r' ? "recoveries" : "migrations";
    const std::string title = std::string(kind[0] == 'r' ? "Recovery" : "Migration") +
                              " latency CDF (unfinished moves at their lower bound)";
    if (by[kind].empty()) {
      notes.push_back("No " + plural + " in this run: no " + label + "-latency CDF.");
    } else if (!thin.empty()) {
      std::string list;
      for (const std::string& t : thin) list += (list.empty() ? "" : ", ") + t;
      notes.push_back("Too few " + plural + " for a " + label + "-latency CDF: " + list + ".");
    }
    if (!sets.empty()) {
      charts.push_back(chart(title, "line", {{"datasets", sets}}, label + " latency (s)",
                             "share of " + plural, "linear"));
    }
  }
}

using Part = std::pair<const char*, double (*)(const StrategyMetrics&)>;

// A stacked bar per strategy, one segment per part, scaled.
json stacked_bars(const std::vector<NamedMetrics>& strategies, const std::vector<Part>& parts,
                  double scale) {
  json labels = json::array(), sets = json::array();
  for (const NamedMetrics& n : strategies) labels.push_back(n.strategy);
  for (const auto& [label, part] : parts) {
    json values = json::array();
    for (const NamedMetrics& n : strategies) values.push_back(part(n.metrics) * scale);
    sets.push_back({{"label", label}, {"data", values}});
  }
  return json{{"labels", labels}, {"datasets", sets}};
}

// The busiest link direction's utilisation over time, per strategy (or a note why there is none).
void link_chart(const std::vector<NamedMetrics>& strategies, json& charts, json& notes) {
  json link_sets = json::array();
  bool any_series = false;
  for (const NamedMetrics& n : strategies) {
    any_series |= n.metrics.busiest_link.has_value();
    if (!n.metrics.busiest_link || n.metrics.busiest_link->t_s.empty()) continue;
    const BusiestLink& b = *n.metrics.busiest_link;
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < b.t_s.size(); ++i) pts.emplace_back(b.t_s[i], b.utilisation[i]);
    link_sets.push_back(xy_dataset(n.strategy, pts));
  }
  if (link_sets.empty()) {
    notes.push_back(any_series
                        ? "No link carried traffic in a sampled interval: no link-utilisation "
                          "chart."
                        : "summary.json has no busiest_link series (an older kvshift wrote "
                          "it): no link-utilisation chart.");
  } else {
    charts.push_back(
        chart("Link utilisation over time (busiest link direction per interval, its mean "
              "over the interval; at most 2,000 points, each the peak of its span)",
              "line", {{"datasets", link_sets}}, "simulated time (s)", "utilisation", "linear"));
  }
}

// Per-strategy charts of a run folder; strategies in name order, as the page always drew them.
json run_charts(const std::filesystem::path& dir, std::vector<NamedMetrics> strategies,
                json& notes) {
  std::sort(strategies.begin(), strategies.end(),
            [](const NamedMetrics& a, const NamedMetrics& b) { return a.strategy < b.strategy; });
  json charts = json::array();
  if (std::filesystem::exists(dir / "recoveries.csv")) {
    latency_cdfs(dir / "recoveries.csv", charts, notes);
  }
  // Replica streams run all the time and dwarf what the moves send: they are in the table,
  // not in this chart.
  const std::vector<Part> bytes = {
      {"kv", [](const StrategyMetrics& m) { return static_cast<double>(m.bytes.kv); }},
      {"predictors",
       [](const StrategyMetrics& m) { return static_cast<double>(m.bytes.predictors); }},
      {"tokens", [](const StrategyMetrics& m) { return static_cast<double>(m.bytes.tokens); }}};
  charts.push_back(chart(
      "Bytes the moves sent over the network, by kind (replica streams: "
      "see the table)",
      "bar", stacked_bars(strategies, bytes, 1.0 / 1048576), "strategy", "MiB", "category", true));
  link_chart(strategies, charts, notes);
  std::vector<Part> gpu_time = {
      {"prefill", [](const StrategyMetrics& m) { return m.gpu_time.prefill; }},
      {"decode", [](const StrategyMetrics& m) { return m.gpu_time.decode; }},
      {"reconstruct", [](const StrategyMetrics& m) { return m.gpu_time.reconstruct; }},
      {"replay", [](const StrategyMetrics& m) { return m.gpu_time.replay; }},
      {"proxy_scoring", [](const StrategyMetrics& m) { return m.gpu_time.proxy_scoring; }}};
  if (std::any_of(strategies.begin(), strategies.end(),
                  [](const NamedMetrics& n) { return n.metrics.preemption.has_value(); })) {
    gpu_time.emplace_back("recompute (preempted)", [](const StrategyMetrics& m) {
      return m.preemption ? m.preemption->recompute_gpu_s : 0.0;
    });
  }
  charts.push_back(chart("GPU time split (summed over GPUs)", "bar",
                         stacked_bars(strategies, gpu_time, 1.0), "strategy", "GPU seconds",
                         "category", true));
  return charts;
}

// A categorical heat map: x/y labels and one category (or -1) per cell.
json category_heatmap(const std::string& title, const std::string& x_title,
                      const std::string& y_title, const std::vector<std::string>& xs,
                      const std::vector<std::string>& ys,
                      const std::vector<std::vector<int>>& cells,
                      const std::vector<std::string>& categories) {
  json rects = json::array(), xt = json::array(), yt = json::array();
  for (std::size_t i = 0; i < xs.size(); ++i) xt.push_back({i + 0.5, xs[i]});
  for (std::size_t j = 0; j < ys.size(); ++j) yt.push_back({j + 0.5, ys[j]});
  for (std::size_t j = 0; j < ys.size(); ++j) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (cells[j][i] >= 0) rects.push_back({i, i + 1, j, j + 1, cells[j][i]});
    }
  }
  return {{"title", title},
          {"xTitle", x_title},
          {"yTitle", y_title},
          {"xRange", {0, xs.size()}},
          {"yRange", {0, ys.size()}},
          {"xTicks", xt},
          {"yTicks", yt},
          {"rects", rects},
          {"categories", categories}};
}

// A sweep.csv's axes (the columns named by a JSON pointer), each with its values in order of
// appearance, and the strategies it has columns for.
struct SweepAxes {
  const Csv& csv;
  std::vector<int> cols;
  std::vector<std::vector<std::string>> labels;  // per axis
  std::vector<std::string> strategies;

  explicit SweepAxes(const Csv& c) : csv(c) {
    for (std::size_t i = 0; i < csv.header.size(); ++i) {
      if (!csv.header[i].empty() && csv.header[i][0] == '/') cols.push_back(static_cast<int>(i));
    }
    for (const std::string& h : csv.header) {
      const auto dot = h.find(".recovery_p99_s");
      if (dot != std::string::npos) strategies.push_back(h.substr(0, dot));
    }
    labels.resize(cols.size());
    for (const auto& r : csv.rows) {
      for (std::size_t a = 0; a < cols.size(); ++a) {
        auto& l = labels[a];
        if (std::find(l.begin(), l.end(), r[cols[a]]) == l.end()) l.push_back(r[cols[a]]);
      }
    }
  }
  // Rows whose axes other than `a` (and `b`) sit at their first value.
  std::vector<const std::vector<std::string>*> rows_along(std::size_t a, int b) const {
    std::vector<const std::vector<std::string>*> out;
    for (const auto& r : csv.rows) {
      bool keep = true;
      for (std::size_t o = 0; o < cols.size(); ++o) {
        if (o != a && static_cast<int>(o) != b && r[cols[o]] != labels[o][0]) keep = false;
      }
      if (keep) out.push_back(&r);
    }
    return out;
  }
  std::ptrdiff_t index(std::size_t a, const std::vector<std::string>& row) const {
    return std::find(labels[a].begin(), labels[a].end(), row[cols[a]]) - labels[a].begin();
  }
};

// Recovery p99 and KV bytes against each of the first three axes, one line per strategy.
void sweep_lines(const SweepAxes& ax, json& part) {
  const Csv& csv = ax.csv;
  const std::pair<const char*, const char*> metrics[] = {{"recovery_p99_s", "recovery p99 (s)"},
                                                         {"kv_bytes", "KV bytes moved"}};
  for (std::size_t a = 0; a < ax.cols.size() && a < 3; ++a) {
    const std::string& axis = csv.header[ax.cols[a]];
    for (const auto& [metric, y_title] : metrics) {
      json sets = json::array();
      bool any = false;
      for (const std::string& s : ax.strategies) {
        const int c = csv.col(s + "." + metric);
        json values(ax.labels[a].size(), nullptr);
        for (const auto* r : ax.rows_along(a, -1)) {
          const double v = num((*r)[c]);
          if (!std::isnan(v)) values[ax.index(a, *r)] = v;
        }
        for (const json& v : values) any |= !v.is_null();
        sets.push_back({{"label", s}, {"data", values}});
      }
      if (!any) {
        part["notes"].push_back(std::string(y_title) + " vs " + axis +
                                ": no values (other axes at their first value)");
        continue;
      }
      part["lines"].push_back(chart(std::string(y_title) + " vs " + axis, "line",
                                    {{"labels", ax.labels[a]}, {"datasets", sets}}, axis, y_title));
    }
  }
}

// Over the first two axes, the strategy with the lowest recovery p99 in each cell (or a tie).
json winner_heatmap(const SweepAxes& ax) {
  const Csv& csv = ax.csv;
  std::vector<std::vector<int>> cells(ax.labels[1].size(),
                                      std::vector<int>(ax.labels[0].size(), -1));
  const int tie = static_cast<int>(ax.strategies.size());
  std::vector<std::string> categories = ax.strategies;
  categories.push_back("tie");
  for (const auto* r : ax.rows_along(0, 1)) {
    int best = -1;
    double best_v = INFINITY;
    for (std::size_t s = 0; s < ax.strategies.size(); ++s) {
      const double v = num((*r)[csv.col(ax.strategies[s] + ".recovery_p99_s")]);
      if (std::isnan(v)) continue;
      if (v == best_v) best = tie;  // equal to the ns: no single winner
      if (v < best_v) best_v = v, best = static_cast<int>(s);
    }
    cells[ax.index(1, *r)][ax.index(0, *r)] = best;
  }
  return category_heatmap("Fastest strategy by recovery p99", csv.header[ax.cols[0]],
                          csv.header[ax.cols[1]], ax.labels[0], ax.labels[1], cells, categories);
}

json sweep_part(const Csv& csv) {
  const SweepAxes ax(csv);
  json part = {{"lines", json::array()}, {"heatmaps", json::array()}, {"notes", json::array()}};
  sweep_lines(ax, part);
  if (ax.cols.size() >= 2) part["heatmaps"].push_back(winner_heatmap(ax));
  json table = {{"header", csv.header}, {"rows", json::array()}};
  for (std::size_t i = 0; i < csv.rows.size() && i < 200; ++i) table["rows"].push_back(csv.rows[i]);
  part["table"] = table;
  return part;
}

// Winner bands (winners.csv) as rectangles on log axes, one map per omitted-group count (at most
// 4).
json analytic_part(const Csv& csv) {
  const int kc = csv.col("omitted_groups"), tc = csv.col("tokens"),
            fc = csv.col("bandwidth_from_bps"), toc = csv.col("bandwidth_to_bps"),
            wc = csv.col("winner");
  std::vector<std::string> categories;
  for (cost_model::Strategy s : cost_model::kCrossoverStrategies)
    categories.emplace_back(cost_model::strategy_name(s));
  std::map<int, std::map<double, std::vector<std::array<double, 3>>>>
      bands;  // k -> tokens -> bands
  double bmin = INFINITY, bmax = 0;
  for (const auto& r : csv.rows) {
    const int cat = static_cast<int>(std::find(categories.begin(), categories.end(), r[wc]) -
                                     categories.begin());
    bands[std::atoi(r[kc].c_str())][num(r[tc])].push_back({num(r[fc]), num(r[toc]), double(cat)});
    bmin = std::min(bmin, num(r[fc]));
    bmax = std::max(bmax, num(r[toc]));
  }
  json maps = json::array();
  std::vector<int> ks;
  for (const auto& [k, rows] : bands) ks.push_back(k);
  const std::size_t step = std::max<std::size_t>(1, (ks.size() + 3) / 4);
  for (std::size_t i = 0; i < ks.size(); i += step) {
    const auto& rows = bands[ks[i]];
    std::vector<double> ts;
    for (const auto& [t, b] : rows) ts.push_back(std::log10(t));
    json rects = json::array(), xt = json::array(), yt = json::array();
    for (std::size_t j = 0; j < ts.size(); ++j) {
      const double y0 =
          j == 0 ? ts[0] - (ts.size() > 1 ? (ts[1] - ts[0]) / 2 : 0.5) : (ts[j - 1] + ts[j]) / 2;
      const double y1 = j + 1 == ts.size() ? ts[j] + (ts.size() > 1 ? (ts[j] - ts[j - 1]) / 2 : 0.5)
                                           : (ts[j] + ts[j + 1]) / 2;
      const auto& bs = std::next(rows.begin(), static_cast<long>(j))->second;
      for (std::size_t b = 0; b < bs.size(); ++b) {
        const double x0 =
            b == 0 ? std::log10(bmin) : (std::log10(bs[b - 1][1]) + std::log10(bs[b][0])) / 2;
        const double x1 = b + 1 == bs.size()
                              ? std::log10(bmax)
                              : (std::log10(bs[b][1]) + std::log10(bs[b + 1][0])) / 2;
        rects.push_back({x0, x1, y0, y1, static_cast<int>(bs[b][2])});
      }
    }
    for (int e = static_cast<int>(std::ceil(std::log10(bmin))); e <= std::floor(std::log10(bmax));
         ++e) {
      static const char* kNames[] = {"1 bps",    "10 bps",   "100 bps", "1 Kbps",   "10 Kbps",
                                     "100 Kbps", "1 Mbps",   "10 Mbps", "100 Mbps", "1 Gbps",
                                     "10 Gbps",  "100 Gbps", "1 Tbps"};
      if (e >= 0 && e <= 12) xt.push_back({e, kNames[e]});
    }
    const std::size_t ystep = std::max<std::size_t>(1, ts.size() / 8);
    for (std::size_t j = 0; j < ts.size(); j += ystep)
      yt.push_back({ts[j], std::to_string(std::llround(std::pow(10, ts[j])))});
    maps.push_back({{"title", "Fastest of full KV / token replay / RISK-KV, " +
                                  std::to_string(ks[i]) + " group(s) omitted (closed forms)"},
                    {"xTitle", "bandwidth (log)"},
                    {"yTitle", "context tokens (log)"},
                    {"xRange", {std::log10(bmin), std::log10(bmax)}},
                    {"yRange",
                     {rects.empty() ? 0.0 : rects[0][2].get<double>(),
                      rects.empty() ? 1.0 : rects.back()[3].get<double>()}},
                    {"xTicks", xt},
                    {"yTicks", yt},
                    {"rects", rects},
                    {"categories", categories}});
  }
  return {{"heatmaps", maps}};
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string load_chart_js() {
  const char* env = std::getenv("KVSHIFT_CHARTJS");
  const std::filesystem::path path =
      env && *env ? env : "/usr/share/javascript/chart.js/chart.min.js";
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error("report: Chart.js not found at " + path.string() +
                             " (install Debian's libjs-chart.js or set KVSHIFT_CHARTJS)");
  }
  return read_text(path);
}

json report_data(const std::filesystem::path& dir) {
  // Nothing of the folder's name (a run writes the page in a staging folder it then renames):
  // the same files give the same page, byte for byte.
  json data = json::object();
  if (std::filesystem::exists(dir / "summary.json")) {
    json summary;
    try {
      summary = json::parse(read_text(dir / "summary.json"));
    } catch (const json::exception& e) {
      throw InputError((dir / "summary.json").string() + ": not JSON (" + e.what() + ")");
    }
    std::vector<NamedMetrics> strategies;
    try {
      strategies = strategies_from_json(summary);
    } catch (const InputError& e) {
      throw InputError((dir / "summary.json").string() + ": " + e.what());
    }
    json notes = json::array();
    json charts = run_charts(dir, std::move(strategies), notes);
    data["run"] = {{"summary", summary}, {"charts", charts}, {"notes", notes}};
  }
  if (std::filesystem::exists(dir / "sweep.csv"))
    data["sweep"] = sweep_part(read_csv(dir / "sweep.csv"));
  if (std::filesystem::exists(dir / "winners.csv"))
    data["analytic"] = analytic_part(read_csv(dir / "winners.csv"));
  if (!data.contains("run") && !data.contains("sweep") && !data.contains("analytic")) {
    throw InputError(dir.string() +
                     ": nothing to report (no summary.json, sweep.csv or winners.csv)");
  }
  return data;
}

std::string render_html_report(const json& data, const std::string& chart_js) {
  std::string payload = data.dump();
  for (std::size_t at = 0; (at = payload.find("</", at)) != std::string::npos; at += 3)
    payload.replace(at, 2, "<\\/");
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvshift "
      "report</title>\n"
      "<style>body{font:14px "
      "sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;"
      "font-size:12px}td,th{border:1px solid #ccc;padding:3px "
      "6px;text-align:right}h2{margin-top:32px}"
      ".chart{margin:12px 0}#kvshift-status{color:#888;font-size:11px}</style>\n"
      "<script>\n" +
      chart_js +
      "\n</script>\n</head><body>\n<h1>kvshift report</h1>\n"
      "<div id=\"content\"></div>\n<div id=\"kvshift-status\" hidden>charts-pending</div>\n"
      "<script id=\"kvshift-data\" type=\"application/json\">" +
      payload + "</script>\n<script>\n" + kPageScript + "\n</script>\n</body></html>\n";
  return page;
}

std::filesystem::path write_html_report(const std::filesystem::path& dir) {
  const std::string page = render_html_report(report_data(dir), load_chart_js());
  write_file_atomic(dir / "report.html", page);
  return dir / "report.html";
}

}  // namespace kvshift::reports
