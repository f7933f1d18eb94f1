// Calibration reports; see report.hpp.
#include "backend/calibrate/report.hpp"

#include <cstdio>
#include <sstream>

#include "backend/calibrate/predictor_file.hpp"

namespace kvshift::backend::calibrate {
namespace {

using nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

json quality_json(const TestQuality& q) {
  return {{"ppl_exact", q.ppl_exact},
          {"ppl_reconstructed", q.ppl_reconstructed},
          {"ppl_change_pct", 100.0 * (q.ppl_reconstructed / q.ppl_exact - 1.0)},
          {"delta_nll_mean", q.delta_nll_mean},
          {"delta_nll_ci95", {q.ci95_low, q.ci95_high}},
          {"violation_rate", q.violation_rate},
          {"requests", q.requests},
          {"delta_nll_per_request", q.per_request}};
}

double total_predictor_bytes(const CalibrationResult& r, cost_model::DType dtype) {
  double b = 0.0;
  for (const FittedGroup& g : r.predictors) b += predictor_bytes(g.predictor, dtype);
  return b;
}

std::string statement(const CalibrationResult& r) {
  const GateChoice& c = r.chosen();
  if (!c.prefix) {
    return "omit nothing: no prefix of the candidate order passes the " +
           std::string(gate_name(c.gate)) + " gate at eps = " + fmt("%g", r.options.eps) +
           " nats/token";
  }
  return "omit " + groups_text(c.test.groups) + " (" +
         fmt("%.1f", 100.0 * c.test.omitted_fraction) + " % of the KV layers) under the " +
         std::string(gate_name(c.gate)) + " gate at eps = " + fmt("%g", r.options.eps);
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
            {"gate", gate_name(c.gate)},
            {"eps", r.options.eps}};
  if (!r.predictors.empty()) {
    json groups = json::array();
    for (const FittedGroup& g : r.predictors) {
      groups.push_back({{"group", g.group},
                        {"target_layers", g.predictor.target_layers},
                        {"anchor_layers", g.predictor.anchor_layers}});
    }
    t["groups"] = groups;
  }
  t["quality"] = {{"ppl_exact", c.test.ppl_exact},
                  {"ppl_reconstructed", c.test.ppl_reconstructed},
                  {"delta_nll_mean", c.test.delta_nll_mean},
                  {"delta_nll_ci95", {c.test.ci95_low, c.test.ci95_high}},
                  {"violation_rate", c.test.violation_rate},
                  {"requests", c.test.requests}};
  return t;
}

json report_json(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                 const RunInfo& info) {
  const GateChoice& c = r.chosen();
  const auto& o = r.options;
  json singles = json::array();
  for (std::size_t i = 0; i < r.singles.size(); ++i) {
    singles.push_back({{"group", r.singles[i].group},
                       {"delta_nll_mean", r.singles[i].risk},
                       {"saved_bytes", r.singles[i].saved_bytes},
                       {"delta_nll_per_request", r.single_deltas[i]}});
  }
  json prefixes = json::array();
  for (const PrefixOutcome& p : r.prefixes) {
    json j = {
        {"groups", p.groups},
        {"omitted_bytes", p.omitted_bytes},
        {"delta_nll_mean", p.mean},
        {"delta_nll_upper90", p.upper90},
        {"passes",
         {{"mean", passes(p, Gate::kMean, o.eps)}, {"upper90", passes(p, Gate::kUpper90, o.eps)}}}};
    if (p.confirm_upper90) {
      j["confirm_upper90"] = *p.confirm_upper90;
      j["passes"]["stable-split"] = passes(p, Gate::kStableSplit, o.eps);
    }
    prefixes.push_back(j);
  }
  json fits = json::array();
  for (const FittedGroup& g : r.predictors) {
    fits.push_back({{"group", g.group},
                    {"anchor_layers", g.predictor.anchor_layers},
                    {"target_layers", g.predictor.target_layers},
                    {"alpha", g.alpha},
                    {"lambda", g.lambda},
                    {"validation_rel_error", g.validation_rel_error},
                    {"fold_max_rel_error", g.fold_max_rel_error},
                    {"bytes", predictor_bytes(g.predictor, info.predictor_dtype)}});
  }
  json gates = json::array();
  for (const GateChoice& g : r.gates) {
    gates.push_back({{"gate", gate_name(g.gate)},
                     {"omitted_groups", g.test.groups},
                     {"omitted_fraction", g.test.omitted_fraction},
                     {"test", quality_json(g.test)}});
  }
  json stages = json::object();
  for (const auto& [stage, seconds] : r.stage_seconds) stages[stage] = seconds;
  return {{"model", spec.name},
          {"model_path", info.model_path},
          {"layers", spec.layers},
          {"corpus", info.corpus_path},
          {"corpus_tokens", info.corpus_tokens},
          {"gate", gate_name(c.gate)},
          {"eps", o.eps},
          {"omitted_groups", c.test.groups},
          {"omitted_fraction", c.test.omitted_fraction},
          {"omit_nothing", !c.prefix.has_value()},
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
              {"select", o.counts.select},
              {"test", o.counts.test},
              {"confirm", o.counts.confirm}}},
            {"seed", o.seed},
            {"resamples", o.resamples},
            {"group_width", o.group_width},
            {"anchor_width", o.anchor_width},
            {"alpha_grid", o.alphas}}},
          {"selection",
           {{"exact_nll_mean", r.exact_nll_select},
            {"singles", singles},
            {"order", r.order},
            {"prefixes", prefixes},
            {"fitted_pairs", r.fits}}},
          {"predictors", fits},
          {"test", quality_json(c.test)},
          {"gates", gates}};
}

std::string report_markdown(const CalibrationResult& r, const cost_model::ModelSpec& spec,
                            const RunInfo& info) {
  const auto& o = r.options;
  const GateChoice& c = r.chosen();
  std::ostringstream md;
  md << "# RISK-KV calibration: " << spec.name << "\n\n"
     << "Result: **" << statement(r) << "**.\n\n"
     << "Corpus `" << info.corpus_path << "` (" << info.corpus_tokens << " tokens); requests of "
     << o.history << " history + " << o.eval << " eval tokens: fit " << o.counts.fit << ", select "
     << o.counts.select << ", test " << o.counts.test;
  if (o.counts.confirm) md << ", confirm " << o.counts.confirm;
  md << ". Predictors " << cost_model::dtype_name(info.predictor_dtype) << ", "
     << fmt("%.3f", total_predictor_bytes(r, info.predictor_dtype) / (1024.0 * 1024.0))
     << " MiB in all. Wall time " << fmt("%.1f", info.wall_time_s) << " s with " << o.threads
     << " worker thread(s); CPU time " << fmt("%.1f", info.cpu_time_s) << " s.\n\n";
  md << "## Table I: chosen topology on the test set\n\n"
     << "| Model | Layers | Omitted groups | Omitted KV | PPL exact | PPL reconstructed | ΔPPL | "
        "mean ΔNLL [95 % CI] | ΔNLL > ε |\n|---|---|---|---|---|---|---|---|---|\n"
     << "| " << spec.name << " | " << spec.layers << " | " << groups_text(c.test.groups) << " | "
     << fmt("%.1f %%", 100.0 * c.test.omitted_fraction) << " | " << fmt("%.3f", c.test.ppl_exact)
     << " | " << fmt("%.3f", c.test.ppl_reconstructed) << " | "
     << fmt("%+.2f %%", 100.0 * (c.test.ppl_reconstructed / c.test.ppl_exact - 1.0)) << " | "
     << fmt("%+.5f", c.test.delta_nll_mean) << " [" << fmt("%+.5f", c.test.ci95_low) << ", "
     << fmt("%+.5f", c.test.ci95_high) << "] | " << fmt("%.1f %%", 100.0 * c.test.violation_rate)
     << " |\n\n";
  md << "## Table II: each gate at ε = " << fmt("%g", o.eps) << " (test set, " << c.test.requests
     << " requests)\n\n| Gate | Omitted groups | Omitted KV | PPL reconstructed | mean ΔNLL | "
        "95 % CI | ΔNLL > ε |\n|---|---|---|---|---|---|---|\n";
  for (const GateChoice& g : r.gates) {
    md << "| " << gate_name(g.gate) << " | " << groups_text(g.test.groups) << " | "
       << fmt("%.1f %%", 100.0 * g.test.omitted_fraction) << " | "
       << fmt("%.3f", g.test.ppl_reconstructed) << " | " << fmt("%+.5f", g.test.delta_nll_mean)
       << " | [" << fmt("%+.5f", g.test.ci95_low) << ", " << fmt("%+.5f", g.test.ci95_high)
       << "] | " << fmt("%.1f %%", 100.0 * g.test.violation_rate) << " |\n";
  }
  md << "\n## Selection (selection set; exact NLL " << fmt("%.4f", r.exact_nll_select)
     << " nats/token)\n\nEach candidate alone:\n\n| Group | mean ΔNLL |\n|---|---|\n";
  for (const SingleRisk& s : r.singles)
    md << "| G" << s.group << " | " << fmt("%+.5f", s.risk) << " |\n";
  md << "\nPrefixes in order of risk per saved byte:\n\n| k | Groups | mean ΔNLL | Upper-90 |";
  const bool confirm = !r.prefixes.empty() && r.prefixes.front().confirm_upper90.has_value();
  md << (confirm ? " Upper-90 (confirm) |" : "") << " passes |\n|---|---|---|---|"
     << (confirm ? "---|" : "") << "---|\n";
  for (std::size_t k = 0; k < r.prefixes.size(); ++k) {
    const PrefixOutcome& p = r.prefixes[k];
    std::string pass;
    for (Gate g : {Gate::kMean, Gate::kUpper90, Gate::kStableSplit}) {
      if ((g != Gate::kStableSplit || confirm) && passes(p, g, o.eps)) {
        pass += (pass.empty() ? "" : ", ") + std::string(gate_name(g));
      }
    }
    md << "| " << k + 1 << " | " << groups_text(p.groups) << " | " << fmt("%+.5f", p.mean) << " | "
       << fmt("%+.5f", p.upper90) << " | ";
    if (confirm) md << fmt("%+.5f", *p.confirm_upper90) << " | ";
    md << (pass.empty() ? "—" : pass) << " |\n";
  }
  if (!r.predictors.empty()) {
    md << "\n## Predictors of the chosen topology\n\n| Group | Anchor layers | α | held-out "
          "rel. error of H | fold check (max rel.) |\n|---|---|---|---|---|\n";
    for (const FittedGroup& g : r.predictors) {
      std::string a;
      for (int l : g.predictor.anchor_layers) a += (a.empty() ? "" : ",") + std::to_string(l);
      md << "| G" << g.group << " | " << a << " | " << fmt("%g", g.alpha) << " | "
         << fmt("%.4f", g.validation_rel_error) << " | " << fmt("%.1e", g.fold_max_rel_error)
         << " |\n";
    }
  }
  md << "\nΔNLL is in nats per eval token (reconstructed minus exact, teacher forced); Upper-90 is "
        "the one-sided 90 % bootstrap bound of the mean ("
     << o.resamples << " paired resamples, seed " << o.seed << "). Stage times (s):";
  for (std::size_t i = 0; i < r.stage_seconds.size(); ++i) {
    const auto& [stage, seconds] = r.stage_seconds[i];
    md << (i ? ", " : " ") << stage << " " << fmt("%.1f", seconds);
  }
  md << ".\n";
  return md.str();
}

}  // namespace kvshift::backend::calibrate
