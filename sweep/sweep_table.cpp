// sweep.csv rows from point summaries (see sweep_table.hpp).
#include "sweep/sweep_table.hpp"

#include "util/csv.hpp"

namespace kvshift::sweep {

const std::vector<MetricColumn>& metric_columns() {
  static const std::vector<MetricColumn> columns = {
      {"completed", "/requests/completed"},
      {"failed", "/requests/failed"},
      {"recoveries", "/moves/recoveries"},
      {"migrations", "/moves/migrations"},
      {"failed_moves", "/moves/failed"},
      {"unfinished_moves", "/moves/unfinished"},
      {"fallbacks", "/moves/fallbacks"},
      {"recovery_p50_s", "/recovery/p50_s"},
      {"recovery_p99_s", "/recovery/p99_s"},
      {"recovery_stall_p99_s", "/recovery_stall/p99_s"},
      {"migration_p50_s", "/migration/p50_s"},
      {"migration_p99_s", "/migration/p99_s"},
      {"ttft_p99_s", "/ttft/p99_s"},
      {"e2e_p99_s", "/e2e/p99_s"},
      {"goodput_tokens_per_s", "/goodput_tokens_per_s"},
      {"kv_bytes", "/bytes/kv"},
      {"predictor_bytes", "/bytes/predictors"},
      {"token_bytes", "/bytes/tokens"},
      {"gpu_reconstruct_s", "/gpu_time_s/reconstruct"},
      {"gpu_replay_s", "/gpu_time_s/replay"},
      {"delta_nll_per_move", "/quality/delta_nll_mean_per_move"},
  };
  return columns;
}

const std::vector<MetricColumn>& deployment_columns() {
  static const std::vector<MetricColumn> columns = {
      {"completed", "/requests/completed"},
      {"recoveries", "/moves/recoveries"},
      {"recovery_p50_s", "/recovery/p50_s"},
      {"recovery_p99_s", "/recovery/p99_s"},
      {"ttft_p99_s", "/ttft/p99_s"},
      {"e2e_p99_s", "/e2e/p99_s"},
      {"goodput_tokens_per_s", "/goodput_tokens_per_s"},
      {"delta_nll_per_move", "/quality/delta_nll_mean_per_move"},
  };
  return columns;
}

namespace {

// A name as one token of a JSON pointer.
std::string pointer_token(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

}  // namespace

std::string sweep_header(const std::vector<Axis>& axes, const std::vector<std::string>& strategies,
                         const std::vector<std::string>& deployments) {
  std::string h = "point,seed";
  for (const Axis& a : axes) h += "," + util::csv_escape(a.pointer);
  for (const std::string& s : strategies) {
    for (const MetricColumn& c : metric_columns()) h += "," + s + "." + c.name;
    for (const std::string& d : deployments) {
      for (const MetricColumn& c : deployment_columns())
        h += "," + util::csv_escape(s + "." + d + "." + c.name);
    }
  }
  return h;
}

std::string sweep_row(const std::vector<Axis>& axes, std::uint64_t k, std::uint64_t seed,
                      const std::vector<std::string>& strategies,
                      const std::vector<reports::NamedMetrics>& metrics,
                      const std::vector<std::string>& deployments) {
  std::string row = std::to_string(k) + "," + std::to_string(seed);
  const std::vector<std::size_t> idx = point_indices(axes, k);
  for (std::size_t i = 0; i < axes.size(); ++i)
    row += "," + util::csv_escape(axes[i].labels[idx[i]]);
  for (const std::string& s : strategies) {
    const reports::StrategyMetrics* strat = reports::find_strategy(metrics, s);
    for (const MetricColumn& c : metric_columns()) {
      row += ",";
      if (!strat) continue;
      if (const auto v = reports::metric_at(*strat, c.pointer)) row += v->dump();
    }
    for (const std::string& d : deployments) {
      for (const MetricColumn& c : deployment_columns()) {
        row += ",";
        if (!strat) continue;
        const std::string at = "/deployments/" + pointer_token(d) + c.pointer;
        if (const auto v = reports::metric_at(*strat, at)) row += v->dump();
      }
    }
  }
  return row;
}

}  // namespace kvshift::sweep
