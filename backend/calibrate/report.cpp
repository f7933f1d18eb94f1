// Calibration reports; see report.hpp.
#include "backend/calibrate/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "backend/calibrate/predictor_file.hpp"
#include "backend/calibrate/text_format.hpp"
#include "cost_model/units.hpp"

namespace kvshift::backend::calibrate {
namespace {

using nlohmann::json;

json quality_json(const TestQuality& q) {
  return {{"set", "test"},
          {"ppl_exact", q.ppl_exact},
          {"ppl_reconstructed", q.ppl_reconstructed},
          {"ppl_change_pct", 100.0 * (q.ppl_reconstructed / q.ppl_exact - 1.0)},
          {"delta_nll_mean", q.delta_nll_mean},
          {"delta_nll_ci95", {q.ci95_low, q.ci95_high}},
          {"delta_nll_upper90", q.upper90},
          {"violation_eps", q.eps},
          {"violations", q.violations},
          {"violation_share", q.violation_share},
          {"violation_share_ci95", {q.share_ci95_low, q.share_ci95_high}},
          {"violation_share_upper90", q.share_upper90},
          {"requests", q.requests},
          {"delta_nll_per_request", q.per_request}};
}

json row_json(const GateChoice& g) {
  json q = quality_json(g.test);
  q.erase("delta_nll_per_request");
  return {{"gate", rule_name(g.rule)},       {"eps", g.eps},
          {"omitted_groups", g.test.groups}, {"omitted_fraction", g.test.omitted_fraction},
          {"holds_on_test", g.holds},        {"test", q}};
}

double total_predictor_bytes(const CalibrationResult& r, cost_model::DType dtype) {
  double b = 0.0;
  for (const FittedGroup& g : r.predictors) b += predictor_bytes(g.predictor, dtype);
  return b;
}

std::string statement(const CalibrationResult& r) {
  const GateChoice& c = r.chosen();
  if (!c.prefix) {
    return "omit nothing: no prefix of the candidate order passes the " + rule_name(c.rule) +
           " gate at eps = " + format_number("%g", c.eps) + " nats/token";
  }
  return "omit " + groups_text(c.test.groups) + " (" + pct(c.test.omitted_fraction) +
         " of the KV layers) under the " + rule_name(c.rule) +
         " gate at eps = " + format_number("%g", c.eps);
}

/// The frontier's rows without the leading copy of the chosen row.
std::vector<const GateChoice*> grid_rows(const CalibrationResult& r) {
  std::vector<const GateChoice*> rows;
  for (std::size_t i = 1; i < r.gates.size(); ++i) rows.push_back(&r.gates[i]);
  return rows;
}

std::string promise(const GateRule& rule) {
  switch (rule.gate) {
    case Gate::kMean:
      return "test mean ≤ ε";
    case Gate::kUpper90:
    case Gate::kStableSplit:
      return "test Upper-90 ≤ ε";
    case Gate::kShare:
      return "test share bound ≤ " + format_number("%g", rule.share);
  }
  return "?";
}

void row_markdown(std::ostringstream& md, const GateChoice& g) {
  const TestQuality& q = g.test;
  md << "| " << rule_name(g.rule) << " | " << format_number("%g", g.eps) << " | "
     << groups_text(q.groups) << " | " << pct(q.omitted_fraction) << " | "
     << format_number("%+.5f", q.delta_nll_mean) << " [" << format_number("%+.5f", q.ci95_low)
     << ", " << format_number("%+.5f", q.ci95_high) << "] | " << format_number("%+.5f", q.upper90)
     << " | " << pct(q.violation_share) << " (" << q.violations << "/" << q.requests << ") ["
     << pct(q.share_ci95_low) << ", " << pct(q.share_ci95_high) << "] | "
     << (!g.prefix ? "yes (exact)"
         : g.holds ? "yes"
                   : "**no**")
     << " (" << promise(g.rule) << ") |\n";
}

}  // namespace

std::string groups_text(const std::vector<int>& groups) {
  if (groups.empty()) return "none (omit nothing)";
  std::string s;
  for (int g : groups) s += (s.empty() ? "G" : ",G") + std::to_string(g);
  return s;
}

json topology_json(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                   const RunInfo& info) {
  const GateChoice& c = r.chosen();
  json t = {{"model", {{"name", spec.name}, {"layers", spec.layers}}},
            {"group_width", r.options.group_width},
            {"anchor_width", r.options.anchor_width},
            {"omitted_groups", c.test.groups},
            {"predictor_dtype", cost_model::dtype_name(info.predictor_dtype)},
            {"gate", rule_name(c.rule)},
            {"eps", c.eps}};
  // Written only when used, so a topology from before sink rows reads the same.
  if (r.options.sink_rows > 0) t["sink_rows"] = r.options.sink_rows;
  if (!r.predictors.empty()) {
    json groups = json::array();
    for (const FittedGroup& g : r.predictors) {
      groups.push_back({{"group", g.group},
                        {"target_layers", g.predictor.target_layers},
                        {"anchor_layers", g.predictor.anchor_layers}});
    }
    t["groups"] = groups;
  }
  // What the scenarios read: the held-out test set's figures, never the selection set's.
  json q = quality_json(c.test);
  q.erase("delta_nll_per_request");
  q["cross_fitted"] = r.cross_fitted;
  t["quality"] = q;
  return t;
}

namespace {

/// The frontier's gate rules, each once, in the order the rows first use them.
std::vector<GateRule> distinct_rules(const CalibrationResult& r) {
  std::vector<GateRule> rules;
  for (const GateChoice& g : r.gates) {
    if (std::find(rules.begin(), rules.end(), g.rule) == rules.end()) rules.push_back(g.rule);
  }
  return rules;
}

json singles_json(const CalibrationResult& r) {
  json singles = json::array();
  for (std::size_t i = 0; i < r.singles.size(); ++i) {
    singles.push_back({{"group", r.singles[i].group},
                       {"delta_nll_mean", r.singles[i].risk},
                       {"saved_bytes", r.singles[i].saved_bytes},
                       {"delta_nll_per_request", r.single_deltas[i]}});
  }
  return singles;
}

json prefixes_json(const CalibrationResult& r) {
  const double eps = r.options.eps;
  const std::vector<GateRule> rules = distinct_rules(r);
  json prefixes = json::array();
  for (const PrefixOutcome& p : r.prefixes) {
    json j = {{"groups", p.groups},
              {"omitted_bytes", p.omitted_bytes},
              {"delta_nll_mean", p.mean},
              {"delta_nll_upper90", p.upper90},
              {"violations", count_over(p.deltas, eps)},
              {"delta_nll_per_request", p.deltas}};
    if (p.confirm_upper90) j["confirm_upper90"] = *p.confirm_upper90;
    for (const GateRule& g : rules) j["passes"][rule_name(g)] = passes(p, g, eps);
    prefixes.push_back(j);
  }
  return prefixes;
}

json predictors_json(const CalibrationResult& r, cost_model::DType dtype) {
  json fits = json::array();
  for (const FittedGroup& g : r.predictors) {
    fits.push_back({{"group", g.group},
                    {"anchor_layers", g.predictor.anchor_layers},
                    {"target_layers", g.predictor.target_layers},
                    {"alpha", g.alpha},
                    {"lambda", g.lambda},
                    {"validation_rel_error", g.validation_rel_error},
                    {"fold_max_rel_error", g.fold_max_rel_error},
                    {"bytes", predictor_bytes(g.predictor, dtype)}});
  }
  return fits;
}

}  // namespace

json report_json(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                 const RunInfo& info) {
  const GateChoice& c = r.chosen();
  const auto& o = r.options;
  const json singles = singles_json(r);
  const json prefixes = prefixes_json(r);
  const json fits = predictors_json(r, info.predictor_dtype);
  json gates = json::array(), frontier = json::array();
  for (const GateChoice* g : grid_rows(r)) {
    frontier.push_back(row_json(*g));
    if (g->eps == o.eps) gates.push_back(row_json(*g));
  }
  json stages = json::object();
  for (const auto& [stage, seconds] : r.stage_seconds) stages[stage] = seconds;
  json selection = {{"cross_fitted", r.cross_fitted},
                    {"order_set", r.cross_fitted ? "order" : "select (in-sample)"},
                    {"exact_nll_mean", r.exact_nll_select},
                    {"singles", singles},
                    {"order", r.order},
                    {"prefixes", prefixes},
                    {"stop_reason", r.stop_reason},
                    {"fitted_pairs", r.fits}};
  if (o.order_rule == OrderRule::kGreedy) {
    selection["order_means"] = r.order_means;
    selection["order_measurements"] = r.order_measurements;
    selection["order_stop"] = r.order_stop;
  }
  return {{"model", spec.name},
          {"model_path", info.model_path},
          {"layers", spec.layers},
          {"corpus", info.corpus_path},
          {"corpus_tokens", info.corpus_tokens},
          {"gate", rule_name(c.rule)},
          {"eps", o.eps},
          {"omitted_groups", c.test.groups},
          {"omitted_fraction", c.test.omitted_fraction},
          {"omit_nothing", !c.prefix.has_value()},
          {"holds_on_test", c.holds},
          {"result", statement(r)},
          {"predictor_dtype", cost_model::dtype_name(info.predictor_dtype)},
          {"predictor_bytes", total_predictor_bytes(r, info.predictor_dtype)},
          {"wall_time_s", info.wall_time_s},
          {"cpu_time_s", info.cpu_time_s},
          {"threads", o.threads},
          {"stage_seconds", stages},
          {"options",
           {{"history", o.history},
            {"eval", o.eval},
            {"requests",
             {{"fit", o.counts.fit},
              {"order", o.counts.order},
              {"select", o.counts.select},
              {"test", o.counts.test},
              {"confirm", o.counts.confirm}}},
            {"seed", o.seed},
            {"resamples", o.resamples},
            {"group_width", o.group_width},
            {"anchor_width", o.anchor_width},
            {"sink_rows", o.sink_rows},
            {"order_rule", to_string(o.order_rule)},
            {"alpha_grid", o.alphas}}},
          {"selection", selection},
          {"predictors", fits},
          {"test", quality_json(c.test)},
          {"gates", gates},
          {"frontier", frontier}};
}

std::string frontier_svg(const CalibrationResult& r) {
  // x: omitted KV (0..max), y: test violation share (0..1); one line per gate, ε ascending.
  const double W = 640, H = 400, L = 60, R = 150, T = 30, B = 50;
  double xmax = 0.05;
  for (const GateChoice* g : grid_rows(r)) xmax = std::max(xmax, g->test.omitted_fraction);
  xmax = std::min(1.0, 0.1 * std::ceil(xmax * 10.0 + 1e-9));
  auto X = [&](double v) { return L + (W - L - R) * v / xmax; };
  auto Y = [&](double v) { return T + (H - T - B) * (1.0 - v); };
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/>\n<text x=\""
    << L << "\" y=\"18\" font-size=\"13\">Omitted KV vs test share of requests over ε</text>\n";
  for (int i = 0; i <= 10; i += 2) {
    const double v = i / 10.0;
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << Y(v) << "\" y2=\"" << Y(v)
      << "\" stroke=\"#ddd\"/><text x=\"" << L - 6 << "\" y=\"" << Y(v) + 4
      << "\" text-anchor=\"end\">" << i * 10 << " %</text>\n";
    const double xv = xmax * v;
    s << "<text x=\"" << X(xv) << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">"
      << format_number("%.0f", 100.0 * xv) << " %</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12
    << "\" text-anchor=\"middle\">omitted KV (share of layers)</text>\n<text x=\"14\" y=\""
    << (T + H - B) / 2 << "\" transform=\"rotate(-90 14 " << (T + H - B) / 2
    << ")\" text-anchor=\"middle\">test requests with ΔNLL &gt; ε</text>\n";
  std::vector<GateRule> rules;
  for (const GateChoice* g : grid_rows(r)) {
    if (std::find(rules.begin(), rules.end(), g->rule) == rules.end()) rules.push_back(g->rule);
  }
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const char* col = colours[i % 6];
    std::string pts;
    for (const GateChoice* g : grid_rows(r)) {
      if (!(g->rule == rules[i])) continue;
      const double x = X(g->test.omitted_fraction), y = Y(g->test.violation_share);
      pts += format_number("%.1f", x) + "," + format_number("%.1f", y) + " ";
      s << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"3\" fill=\"" << col << "\"><title>"
        << rule_name(g->rule) << " ε=" << format_number("%g", g->eps) << ": "
        << groups_text(g->test.groups) << "</title></circle>\n<text x=\"" << x + 4 << "\" y=\""
        << y - 4 << "\" fill=\"" << col << "\" font-size=\"9\">" << format_number("%g", g->eps)
        << "</text>\n";
    }
    s << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.5\" points=\"" << pts
      << "\"/>\n<text x=\"" << W - R + 10 << "\" y=\"" << T + 16 * (i + 1) << "\" fill=\"" << col
      << "\">" << rule_name(rules[i]) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

namespace {

/// The selection: each candidate alone, then the prefixes in order of risk per saved byte with
/// the gates each passes.
void selection_markdown(std::ostringstream& md, const CalibrationResult& r) {
  const auto& o = r.options;
  md << "\n## Selection\n\nEach candidate alone on the " << (r.cross_fitted ? "order" : "selection")
     << " set:\n\n| Group | mean ΔNLL |\n|---|---|\n";
  for (const SingleRisk& s : r.singles)
    md << "| G" << s.group << " | " << format_number("%+.5f", s.risk) << " |\n";
  if (o.order_rule == OrderRule::kGreedy) {
    md << "\nGreedy order (each next group the one costing least per saved byte beside those "
          "chosen, "
       << r.order_measurements << " topologies measured beside a choice); the chosen groups "
       << "together on the " << (r.cross_fitted ? "order" : "selection")
       << " set:\n\n| k | adds | mean ΔNLL of π1..πk |\n|---|---|---|\n";
    for (std::size_t k = 0; k < r.order_means.size(); ++k) {
      md << "| " << k + 1 << " | G" << r.order[k] << " | "
         << format_number("%+.5f", r.order_means[k]) << " |\n";
    }
    if (r.order_means.size() < r.order.size()) {
      md << "\nThe rest follow by their last measured cost per byte (the choice's mean passed "
         << format_number("%g", r.order_stop) << ").\n";
    }
  }
  md << (o.order_rule == OrderRule::kGreedy ? "\nPrefixes of the greedy order"
                                            : "\nPrefixes in order of risk per saved byte")
     << ", on the selection set (exact NLL " << format_number("%.4f", r.exact_nll_select)
     << " nats/token; " << r.stop_reason
     << "):\n\n| k | Groups | mean ΔNLL | Upper-90 | ΔNLL > ε |";
  const bool confirm = !r.prefixes.empty() && r.prefixes.front().confirm_upper90.has_value();
  md << (confirm ? " Upper-90 (confirm) |" : "") << " passes at ε = " << format_number("%g", o.eps)
     << " |\n|---|---|---|---|---|" << (confirm ? "---|" : "") << "---|\n";
  const std::vector<GateRule> rules = distinct_rules(r);
  for (std::size_t k = 0; k < r.prefixes.size(); ++k) {
    const PrefixOutcome& p = r.prefixes[k];
    std::string pass;
    for (const GateRule& g : rules) {
      if (passes(p, g, o.eps)) pass += (pass.empty() ? "" : ", ") + rule_name(g);
    }
    md << "| " << k + 1 << " | " << groups_text(p.groups) << " | " << format_number("%+.5f", p.mean)
       << " | " << format_number("%+.5f", p.upper90) << " | " << count_over(p.deltas, o.eps) << "/"
       << p.deltas.size() << " | ";
    if (confirm) md << format_number("%+.5f", *p.confirm_upper90) << " | ";
    md << (pass.empty() ? "—" : pass) << " |\n";
  }
}

/// The chosen topology's predictors, and how the figures were computed.
void predictors_markdown(std::ostringstream& md, const CalibrationResult& r) {
  const auto& o = r.options;
  if (!r.predictors.empty()) {
    md << "\n## Predictors of the chosen topology\n\n| Group | Anchor layers | α | held-out "
          "rel. error of H | fold check (max rel.) |\n|---|---|---|---|---|\n";
    for (const FittedGroup& g : r.predictors) {
      std::string a;
      for (int l : g.predictor.anchor_layers) a += (a.empty() ? "" : ",") + std::to_string(l);
      md << "| G" << g.group << " | " << a << " | " << format_number("%g", g.alpha) << " | "
         << format_number("%.4f", g.validation_rel_error) << " | "
         << format_number("%.1e", g.fold_max_rel_error) << " |\n";
    }
  }
  md << "\nΔNLL is in nats per eval token (reconstructed minus exact, teacher forced); Upper-90 is "
        "the one-sided 90 % bootstrap bound of the mean ("
     << o.resamples << " paired resamples, seed " << o.seed
     << "); share:s accepts when the one-sided 90 % Clopper–Pearson bound of the share of "
        "requests over ε is ≤ s. Stage times (s):";
  for (std::size_t i = 0; i < r.stage_seconds.size(); ++i) {
    const auto& [stage, seconds] = r.stage_seconds[i];
    md << (i ? ", " : " ") << stage << " " << format_number("%.1f", seconds);
  }
  md << ".\n";
}

}  // namespace

std::string report_markdown(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                            const RunInfo& info) {
  const auto& o = r.options;
  const GateChoice& c = r.chosen();
  std::ostringstream md;
  md << "# RISK-KV calibration: " << spec.name << "\n\n"
     << "Result: **" << statement(r) << "**; on the held-out test set the gate "
     << (c.holds ? "still holds" : "**does not hold**") << " (" << promise(c.rule) << ").\n\n"
     << "Corpus `" << info.corpus_path << "` (" << info.corpus_tokens << " tokens); requests of "
     << o.history << " history + " << o.eval << " eval tokens: fit " << o.counts.fit;
  if (r.cross_fitted) md << ", order " << o.counts.order;
  md << ", select " << o.counts.select << ", test " << o.counts.test;
  if (o.counts.confirm) md << ", confirm " << o.counts.confirm;
  md << ". Selection "
     << (r.cross_fitted ? "cross-fitted: the order is estimated on the order set, the prefixes "
                          "are gated on the disjoint selection set"
                        : "in-sample: order and gates on the same selection set")
     << ". ";
  if (o.sink_rows > 0) {
    md << "The first " << o.sink_rows
       << " row(s) of every omitted layer are sent exact (sink rows): left out of the fit, "
          "counted in the bytes sent. ";
  }
  md << "Predictors " << cost_model::dtype_name(info.predictor_dtype) << ", "
     << format_number("%.3f", total_predictor_bytes(r, info.predictor_dtype) / (1024.0 * 1024.0))
     << " MiB in all. Wall time " << format_number("%.1f", info.wall_time_s) << " s with "
     << o.threads << " worker thread(s); CPU time " << format_number("%.1f", info.cpu_time_s)
     << " s.\n\n";
  md << "## Table I: chosen topology on the test set\n\n"
     << "| Model | Layers | Omitted groups | Omitted KV | PPL exact | PPL reconstructed | ΔPPL | "
        "mean ΔNLL [95 % CI] | Upper-90 | ΔNLL > ε [95 % CI] |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
     << "| " << spec.name << " | " << spec.layers << " | " << groups_text(c.test.groups) << " | "
     << pct(c.test.omitted_fraction) << " | " << format_number("%.3f", c.test.ppl_exact) << " | "
     << format_number("%.3f", c.test.ppl_reconstructed) << " | "
     << format_number("%+.2f %%", 100.0 * (c.test.ppl_reconstructed / c.test.ppl_exact - 1.0))
     << " | " << format_number("%+.5f", c.test.delta_nll_mean) << " ["
     << format_number("%+.5f", c.test.ci95_low) << ", " << format_number("%+.5f", c.test.ci95_high)
     << "] | " << format_number("%+.5f", c.test.upper90) << " | " << pct(c.test.violation_share)
     << " [" << pct(c.test.share_ci95_low) << ", " << pct(c.test.share_ci95_high) << "] |\n\n";
  const std::string head =
      "| Gate | ε | Omitted groups | Omitted KV | test mean ΔNLL [95 % CI] | test Upper-90 | "
      "test ΔNLL > ε [95 % CI] | promise holds on test |\n|---|---|---|---|---|---|---|---|\n";
  md << "## Table II: each gate at ε = " << format_number("%g", o.eps) << " (test set, "
     << c.test.requests << " requests)\n\n"
     << head;
  for (const GateChoice* g : grid_rows(r)) {
    if (g->eps == o.eps) row_markdown(md, *g);
  }
  md << "\n## Frontier: every gate at every ε (test set)\n\nThe share of requests over ε is "
        "counted at the row's ε, with a Clopper–Pearson 95 % interval. A gate's promise holds "
        "when the gate, re-applied to the test set, still accepts its choice. Chart: "
        "frontier.svg.\n\n"
     << head;
  for (const GateChoice* g : grid_rows(r)) row_markdown(md, *g);
  selection_markdown(md, r);
  predictors_markdown(md, r);
  return md.str();
}

}  // namespace kvshift::backend::calibrate
