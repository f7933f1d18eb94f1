// Quality reports; see quality_report.hpp.
#include "backend/calibrate/quality_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "backend/calibrate/text_format.hpp"
#include "cost_model/units.hpp"

namespace kvshift::backend::calibrate {
namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

/// The ratios measured, ascending.
std::vector<double> ratios(const QualityResult& r) {
  std::set<double> s;
  for (const QualityRow& row : r.rows) {
    if (row.retention) s.insert(*row.retention);
  }
  return {s.begin(), s.end()};
}

/// The headline ratio: 0.5 when measured, else the one closest to it.
std::optional<double> headline_ratio(const QualityResult& r) {
  const auto all = ratios(r);
  if (all.empty()) return std::nullopt;
  return *std::min_element(all.begin(), all.end(), [](double a, double b) {
    return std::abs(a - 0.5) < std::abs(b - 0.5);
  });
}

/// Whether the row a paired difference compares is of a non-oracle method (not kvzip).
bool method_is_not_oracle(const QualityResult& r, const PairedDifference& d) {
  for (const QualityRow& row : r.rows) {
    if (row.label == d.label && row.retention == d.retention) return row.method != "kvzip";
  }
  return false;
}

/// The paired difference of `row` against its ratio's leader, if it has one.
const PairedDifference* paired_of(const QualityResult& r, const QualityRow& row) {
  for (const PairedDifference& d : r.paired) {
    if (d.label == row.label && d.retention == row.retention) return &d;
  }
  return nullptr;
}

std::string interval(double lo, double hi, const char* f) {
  return "[" + format_number(f, lo) + ", " + format_number(f, hi) + "]";
}

}  // namespace

std::string quality_headline(const QualityResult& r) {
  const auto rho = headline_ratio(r);
  if (!rho) return "exact NLL " + format_number("%.4f", r.exact_nll) + " nats/token";
  const QualityRow* best = nullptr;
  std::vector<const QualityRow*> proxies;  // one per mapper measured
  for (const QualityRow& row : r.rows) {
    if (row.retention != rho || row.method == "kvzip") continue;
    if (!best || row.mean < best->mean) best = &row;
    if (row.method == "proxykv" && row.kvzip_share) proxies.push_back(&row);
  }
  std::ostringstream s;
  s << "at ρ = " << *rho << ", ";
  if (best) {
    s << best->label << " loses least of the non-oracle methods (ΔNLL "
      << format_number("%+.4f", best->mean) << ")";
    // Whether the lead is real: the others whose paired difference is not clearly above 0.
    std::vector<std::string> level, others;
    for (const PairedDifference& d : r.paired) {
      if (d.retention != *rho || !method_is_not_oracle(r, d)) continue;
      others.push_back(d.label);
      if (!(d.ci95_low > 0.0)) level.push_back(d.label);
    }
    if (!others.empty() && level.empty()) s << ", clear of every other by a paired 95 % CI";
    if (!level.empty()) {
      s << ", not separated from ";
      for (std::size_t i = 0; i < level.size(); ++i) s << (i ? ", " : "") << level[i];
      s << " by a paired 95 % CI";
    }
  }
  for (const QualityRow* proxy : proxies) {
    s << "; ProxyKV" << (proxies.size() > 1 ? " (" + proxy->label + ")" : "") << " recovers "
      << pct(*proxy->kvzip_share) << " of KVZip's quality [95 % CI " << pct(proxy->kvzip_share_low)
      << ", " << pct(proxy->kvzip_share_high) << "]";
  }
  return s.str();
}

json quality_json(const QualityResult& r, const cost_model::ModelSpec& spec,
                  const QualityRunInfo& info) {
  const QualityOptions& o = r.options;
  json rows = json::array();
  for (const QualityRow& row : r.rows) {
    json paired = nullptr;
    if (const PairedDifference* d = paired_of(r, row)) {
      paired = {{"leader", d->leader}, {"mean", d->mean}, {"ci95", {d->ci95_low, d->ci95_high}}};
    }
    json share = nullptr;
    if (row.kvzip_share) {
      share = {{"value", *row.kvzip_share}, {"ci95", {row.kvzip_share_low, row.kvzip_share_high}}};
    }
    rows.push_back({{"policy", row.policy},
                    {"method", row.method},
                    {"label", row.label},
                    {"retention", optional_number(row.retention)},
                    {"delta_nll_mean", row.mean},
                    {"delta_nll_ci95", {row.ci95_low, row.ci95_high}},
                    {"over_eps",
                     {{"eps", o.eps},
                      {"count", row.over_eps},
                      {"share", row.over_share},
                      {"share_ci95", {row.over_ci95_low, row.over_ci95_high}}}},
                    {"ppl_exact", r.ppl_exact},
                    {"ppl", row.ppl},
                    {"recall_at_k_vs_kvzip", optional_number(row.recall)},
                    {"kvzip_top10_kept", optional_number(row.kvzip_top_kept)},
                    {"kvzip_share_recovered", share},
                    {"paired_vs_leader", paired},
                    {"per_request", row.per_request}});
    if (!row.topology_digest.empty()) {
      rows.back()["topology"] = {{"digest", row.topology_digest},
                                 {"omitted_groups", row.omitted_groups}};
    }
  }
  json timings = r.timings_s;
  json doc = {
      {"format", "kvshift-quality"},
      {"version", 1},
      {"model",
       {{"name", spec.name},
        {"path", info.model_path},
        {"layers", spec.layers},
        {"kv_heads", spec.kv_heads}}},
      {"corpus",
       {{"path", info.corpus_path},
        {"file", std::filesystem::path(info.corpus_path).filename().string()},
        {"tokens", info.corpus_tokens},
        {"span", {o.span.begin, o.span.end}}}},
      {"history", o.history},
      {"eval", o.eval},
      {"requests", r.starts.size()},
      {"starts", r.starts},
      {"keep", {{"sink_tokens", o.keep.sink_tokens}, {"recent_window", o.keep.recent_window}}},
      {"selection", o.budget == Budget::kGlobal
                        ? "top share over all KV heads (one budget, each head's count its own)"
                        : "top-K per KV head (equal budget per head)"},
      {"budget", budget_name(o.budget)},
      {"snapkv_window", o.snapkv_window},
      {"seed", o.seed},
      {"resamples", o.resamples},
      {"threads", o.threads},
      {"exact",
       {{"nll", r.exact_nll},
        {"nll_ci95", {r.exact_ci95_low, r.exact_ci95_high}},
        {"ppl", r.ppl_exact},
        {"per_request", r.exact_per_request}}},
      {"rows", rows},
      {"timings_s", timings},
      {"wall_time_s", info.wall_time_s},
      {"notes", r.notes}};
  if (!info.proxy_name.empty()) doc["proxy"] = info.proxy_name;
  if (r.timings_s.count("mapper_forward") && r.timings_s.count("target_prefill")) {
    doc["mapper_share_of_target_prefill"] =
        r.timings_s.at("mapper_forward") / r.timings_s.at("target_prefill");
  }
  return doc;
}

std::string quality_markdown(const QualityResult& r, const cost_model::ModelSpec& spec,
                             const QualityRunInfo& info) {
  const QualityOptions& o = r.options;
  std::ostringstream md;
  md << "# KV policy quality: " << spec.name << "\n\n"
     << "Result: **" << quality_headline(r) << "**.\n\n"
     << "Corpus `" << info.corpus_path << "` (" << info.corpus_tokens << " tokens), span "
     << span_text(o.span) << "; " << r.starts.size() << " requests of " << o.history
     << " history + " << o.eval << " eval tokens. Exact NLL " << format_number("%.4f", r.exact_nll)
     << " nats/token " << interval(r.exact_ci95_low, r.exact_ci95_high, "%.4f") << ", PPL "
     << format_number("%.3f", r.ppl_exact) << ". Pruning keeps the first " << o.keep.sink_tokens
     << " and the last " << o.keep.recent_window << " history tokens always and "
     << (o.budget == Budget::kGlobal
             ? "the highest scores over all KV heads together (one budget, `--budget global`: "
               "each head keeps its own number of tokens)"
             : "the top-K of each KV head by the method's scores (the same number per head)");
  if (!info.proxy_name.empty()) md << "; ProxyKV's proxy: " << info.proxy_name;
  md << ". Intervals: 95 % bootstrap over requests (" << o.resamples
     << " resamples); \"> ε\": requests whose ΔNLL exceeds " << format_number("%g", o.eps)
     << " with a Clopper–Pearson 95 % interval; \"recall@K\": the share of a method's kept "
        "tokens that KVZip keeps at the same ρ; \"KVZip's top 10 % kept\": the share of the tokens "
        "KVZip ranks in its top 10 % of a head (forced tokens left out) that the method keeps; "
        "the last column: the method's ΔNLL minus the leader's (the non-oracle method that loses "
        "least at that ρ), request by request, with a paired interval: above 0 throughout, a "
        "clear loss; reaching 0, the two are not separated by these requests. Wall time "
     << format_number("%.1f", info.wall_time_s) << " s with " << o.threads
     << " request(s) side by side.\n\n";
  bool lossless = false;
  for (const QualityRow& row : r.rows) lossless |= !row.retention;
  if (lossless) {
    md << "## Policies without a ratio\n\n| policy | mean ΔNLL [95 % CI] | PPL | > ε |\n"
          "|---|---|---|---|\n";
    for (const QualityRow& row : r.rows) {
      if (row.retention) continue;
      md << "| `" << row.policy << "` | " << format_number("%+.5f", row.mean) << " "
         << interval(row.ci95_low, row.ci95_high, "%+.5f") << " | "
         << format_number("%.3f", row.ppl) << " | " << row.over_eps << "/" << row.per_request.size()
         << " |\n";
    }
    md << "\n";
  }
  for (double rho : ratios(r)) {
    std::string leader;
    for (const PairedDifference& d : r.paired) {
      if (d.retention == rho) leader = d.leader;
    }
    md << "## ρ = " << rho
       << "\n\n| method | mean ΔNLL [95 % CI] | PPL | > ε [95 % CI] | "
          "recall@K vs KVZip | KVZip's top 10 % kept | KVZip's quality recovered [95 % CI] | "
       << (leader.empty() ? "paired" : "− " + leader + "'s ΔNLL, paired")
       << " [95 % CI] |\n|---|---|---|---|---|---|---|---|\n";
    for (const QualityRow& row : r.rows) {
      if (row.retention != rho) continue;
      const PairedDifference* d = paired_of(r, row);
      md << "| " << row.label << " | " << format_number("%+.4f", row.mean) << " "
         << interval(row.ci95_low, row.ci95_high, "%+.4f") << " | "
         << format_number("%.3f", row.ppl) << " | " << pct(row.over_share) << " "
         << interval(100 * row.over_ci95_low, 100 * row.over_ci95_high, "%.0f") << " | "
         << (row.recall ? pct(*row.recall) : "—") << " | "
         << (row.kvzip_top_kept ? pct(*row.kvzip_top_kept) : "—") << " | "
         << (row.kvzip_share
                 ? pct(*row.kvzip_share) + " " +
                       interval(100 * row.kvzip_share_low, 100 * row.kvzip_share_high, "%.0f")
                 : "—")
         << " | "
         << (d ? format_number("%+.4f", d->mean) + " " +
                     interval(d->ci95_low, d->ci95_high, "%+.4f")
             : row.label == leader ? "(leader)"
                                   : "—")
         << " |\n";
    }
    md << "\n";
  }
  if (!r.timings_s.empty()) {
    md << "## Timings (median seconds per request, one core each)\n\n| step | s |\n|---|---|\n";
    for (const auto& [step, s] : r.timings_s)
      md << "| " << step << " | " << format_number("%.3f", s) << " |\n";
    if (r.timings_s.count("mapper_forward") && r.timings_s.count("target_prefill")) {
      md << "\nThe mapper's forward takes "
         << pct(r.timings_s.at("mapper_forward") / r.timings_s.at("target_prefill"))
         << " of the target's prefill of the history.\n";
    }
    md << "\n";
  }
  if (!r.notes.empty()) {
    md << "## Notes\n\n";
    for (const std::string& n : r.notes) md << "- " << n << "\n";
  }
  return md.str();
}

std::string quality_svg(const QualityResult& r, const cost_model::ModelSpec& spec) {
  const double W = 640, H = 400, L = 70, R = 130, T = 30, B = 50;
  double ymax = 1e-3;
  for (const QualityRow& row : r.rows) {
    if (row.retention) ymax = std::max(ymax, row.ci95_high);
  }
  ymax *= 1.05;
  auto X = [&](double v) { return L + (W - L - R) * v; };
  auto Y = [&](double v) { return T + (H - T - B) * (1.0 - std::max(0.0, v) / ymax); };
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/>\n<text x=\""
    << L << "\" y=\"18\" font-size=\"13\">" << spec.name
    << ": ΔNLL vs retention (95 % CI)</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double v = ymax * i / 5.0, xv = i / 5.0;
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << Y(v) << "\" y2=\"" << Y(v)
      << "\" stroke=\"#ddd\"/><text x=\"" << L - 6 << "\" y=\"" << Y(v) + 4
      << "\" text-anchor=\"end\">" << format_number("%.3f", v) << "</text>\n<text x=\"" << X(xv)
      << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">" << format_number("%.1f", xv)
      << "</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12
    << "\" text-anchor=\"middle\">retention ρ (share of tokens kept per head)</text>\n<text "
       "x=\"14\" y=\""
    << (T + H - B) / 2 << "\" transform=\"rotate(-90 14 " << (T + H - B) / 2
    << ")\" text-anchor=\"middle\">mean ΔNLL (nats/token)</text>\n";
  std::vector<std::string> methods;
  for (const QualityRow& row : r.rows) {
    if (row.retention && std::find(methods.begin(), methods.end(), row.label) == methods.end()) {
      methods.push_back(row.label);
    }
  }
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const char* col = colours[i % 6];
    std::string pts;
    for (const QualityRow& row : r.rows) {
      if (row.label != methods[i] || !row.retention) continue;
      const double x = X(*row.retention);
      pts += format_number("%.1f", x) + "," + format_number("%.1f", Y(row.mean)) + " ";
      s << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << Y(row.ci95_low) << "\" y2=\""
        << Y(row.ci95_high) << "\" stroke=\"" << col << "\"/><circle cx=\"" << x << "\" cy=\""
        << Y(row.mean) << "\" r=\"3\" fill=\"" << col << "\"><title>" << row.label
        << " ρ=" << *row.retention << ": " << format_number("%+.4f", row.mean)
        << "</title></circle>\n";
    }
    s << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.5\" points=\"" << pts
      << "\"/>\n<text x=\"" << W - R + 10 << "\" y=\"" << T + 16 * (i + 1) << "\" fill=\"" << col
      << "\">" << methods[i] << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace kvshift::backend::calibrate
