// Fidelity rows from the two sides' records.
#include "testbed/replay_fidelity.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "cost_model/units.hpp"
#include "util/percentile.hpp"

namespace kvshift::testbed {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// Fewer samples than this on either side: the percentile is a few requests' figure.
constexpr std::size_t kFewSamples = 10;

struct Sample {
  std::vector<double> values;
  double at(double q) const {
    if (values.empty()) return kNaN;
    std::vector<double> v = values;
    std::sort(v.begin(), v.end());
    return util::percentile(v, q);
  }
  double mean() const {
    if (values.empty()) return kNaN;
    double s = 0;
    for (double x : values) s += x;
    return s / static_cast<double>(values.size());
  }
};

/// Done moves' latency, its parts and bytes, and each move's latency by (request, trigger)
/// for pairing. source_wait: the replay's measured wait for the source's step in flight.
struct Moves {
  Sample latency, bytes, transfer, queue, compute, source_wait;
  std::map<std::pair<std::uint64_t, int>, double> by_request;
};

/// Every figure a side gives. Moves are grouped by the strategy that executed them: a run's
/// own strategy, and what its moves fell back to (a failure's token replay here).
struct Figures {
  Sample ttft, tpot, e2e, delta_nll, agreement;
  std::map<std::string, Moves> moves;
};

Figures request_figures(const std::vector<sim::RequestRecord>& requests) {
  Figures f;
  for (const sim::RequestRecord& r : requests) {
    if (r.first_token_ns >= 0) {
      f.ttft.values.push_back(1e-9 * double(r.first_token_ns - r.arrival_ns));
    }
    if (r.outcome != sim::RequestOutcome::kCompleted) continue;
    f.e2e.values.push_back(1e-9 * double(r.finish_ns - r.arrival_ns));
    if (r.output_tokens > 1) {
      f.tpot.values.push_back(1e-9 * double(r.finish_ns - r.first_token_ns) /
                              double(r.output_tokens - 1));
    }
  }
  return f;
}

/// `source_wait_ns`: one per move, or empty (the simulator has none to give).
void add_moves(Figures& f, const std::vector<sim::MoveRecord>& moves,
               const std::vector<std::int64_t>& source_wait_ns = {}) {
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const sim::MoveRecord& m = moves[i];
    if (m.outcome != sim::MoveOutcome::kDone) continue;
    Moves& g = f.moves[m.strategy];
    const double latency = 1e-9 * double(m.end_ns - m.start_ns);
    g.latency.values.push_back(latency);
    g.bytes.values.push_back(double(m.kv_bytes + m.token_bytes));
    g.transfer.values.push_back(1e-9 * double(m.transfer_ns));
    g.queue.values.push_back(1e-9 * double(m.queue_ns));
    g.compute.values.push_back(1e-9 * double(m.compute_ns));
    if (i < source_wait_ns.size() && source_wait_ns[i] >= 0) {
      g.source_wait.values.push_back(1e-9 * double(source_wait_ns[i]));
    }
    g.by_request[{m.request, static_cast<int>(m.trigger)}] = latency;
  }
}

/// Where a group of moves' time went on each side: the medians of its parts, so a move
/// row's error comes with its cause.
std::string move_parts(const Moves& simulated, const Moves& replayed) {
  if (simulated.latency.values.empty() || replayed.latency.values.empty()) return {};
  auto ms = [](double s) { return format_number("%.1f", 1e3 * s); };
  auto part = [&](const char* name, const Sample& s, const Sample& r) {
    return std::string(name) + " " + ms(r.at(0.5)) + " / " + ms(s.at(0.5)) + " ms";
  };
  std::string out =
      "medians, replay / simulator: " + part("transfer", simulated.transfer, replayed.transfer) +
      ", " + part("queue", simulated.queue, replayed.queue);
  if (!replayed.source_wait.values.empty()) {
    out +=
        " (of it the source's wait for its step in flight, which the simulator does not "
        "charge: " +
        ms(replayed.source_wait.at(0.5)) + " ms)";
  }
  return out + ", " + part("compute", simulated.compute, replayed.compute);
}

/// ΔNLL is read over the moves the run's own strategy executed (its recoveries that fell
/// back to token replay would dilute it with zeros).
Figures simulated_figures(const sim::RunResult& run) {
  Figures f = request_figures(run.requests);
  add_moves(f, run.moves);
  for (const sim::MoveRecord& m : run.moves) {
    if (m.outcome == sim::MoveOutcome::kDone && m.strategy == run.strategy) {
      f.delta_nll.values.push_back(m.delta_nll);
    }
  }
  return f;
}

Figures replayed_figures(const ReplayRun& run) {
  Figures f = request_figures(run.requests);
  add_moves(f, run.moves, run.source_wait_ns);
  for (std::size_t i = 0; i < run.moves.size(); ++i) {
    if (run.quality[i].steps == 0 ||
        run.moves[i].strategy != cost_model::strategy_name(run.strategy)) {
      continue;
    }
    f.delta_nll.values.push_back(run.quality[i].delta_nll);
    f.agreement.values.push_back(run.quality[i].greedy_agreement);
  }
  return f;
}

double relative(double replayed, double simulated) {
  if (std::isnan(replayed) || std::isnan(simulated)) return kNaN;
  if (simulated == 0) return replayed == 0 ? 0 : kNaN;
  return (replayed - simulated) / simulated;
}

std::string cell(double v, const char* fmt) { return std::isnan(v) ? "–" : format_number(fmt, v); }

}  // namespace

std::vector<FidelityRow> fidelity_rows(const std::vector<sim::RunResult>& simulated,
                                       const std::vector<ReplayRun>& replayed) {
  std::vector<FidelityRow> rows;
  for (std::size_t i = 0; i < replayed.size() && i < simulated.size(); ++i) {
    const std::string strategy = cost_model::strategy_name(replayed[i].strategy);
    const Figures s = simulated_figures(simulated[i]);
    const Figures r = replayed_figures(replayed[i]);
    auto add = [&](const std::string& metric, const std::string& unit, const Sample& a,
                   const Sample& b, double q, double target, std::string note = {}) {
      FidelityRow row{strategy, metric, unit};
      row.simulated = q < 0 ? a.mean() : a.at(q);
      row.replayed = q < 0 ? b.mean() : b.at(q);
      row.simulated_n = a.values.size();
      row.replayed_n = b.values.size();
      row.error = relative(row.replayed, row.simulated);
      row.target = target;
      if (std::min(row.simulated_n, row.replayed_n) < kFewSamples) {
        note += (note.empty() ? "" : "; ") + std::string("fewer than ") +
                std::to_string(kFewSamples) + " samples on a side";
      }
      row.note = note;
      rows.push_back(row);
    };
    add("ttft_p50", "s", s.ttft, r.ttft, 0.5, 0.10);
    add("ttft_p99", "s", s.ttft, r.ttft, 0.99, 0.20);
    add("tpot_p50", "s", s.tpot, r.tpot, 0.5, 0);
    add("tpot_p99", "s", s.tpot, r.tpot, 0.99, 0);
    add("e2e_p50", "s", s.e2e, r.e2e, 0.5, 0);
    add("e2e_p99", "s", s.e2e, r.e2e, 0.99, 0);
    // The run's own moves first (its metric names carry no suffix), then its fallbacks'.
    std::vector<std::string> executed{strategy};
    for (const Figures* side : {&s, &r}) {
      for (const auto& [name, moves] : side->moves) {
        if (std::find(executed.begin(), executed.end(), name) == executed.end()) {
          executed.push_back(name);
        }
      }
    }
    for (const std::string& e : executed) {
      const std::string suffix = e == strategy ? "" : "[" + e + "]";
      const Moves none;
      const Moves& a = s.moves.count(e) ? s.moves.at(e) : none;
      const Moves& b = r.moves.count(e) ? r.moves.at(e) : none;
      add("move_p50" + suffix, "s", a.latency, b.latency, 0.5, 0.10, move_parts(a, b));
      add("move_p99" + suffix, "s", a.latency, b.latency, 0.99, 0.20);
      add("bytes_per_move" + suffix, "B", a.bytes, b.bytes, -1, 0);
      // The same request's same move on both sides, where both made it.
      Sample paired_sim, paired_replay, errors;
      for (const auto& [key, latency] : b.by_request) {
        const auto it = a.by_request.find(key);
        if (it == a.by_request.end()) continue;
        paired_sim.values.push_back(it->second);
        paired_replay.values.push_back(latency);
        errors.values.push_back(std::abs(relative(latency, it->second)));
      }
      add("paired_move_p50" + suffix, "s", paired_sim, paired_replay, 0.5, 0,
          errors.values.empty()
              ? std::string("no request made this move on both sides")
              : "the moves both sides made of the same request: median |error| per move " +
                    format_number("%.1f %%", 100 * errors.at(0.5)) + ", largest " +
                    format_number("%.1f %%", 100 * errors.at(1.0)));
    }
    add("delta_nll", "nats/token", s.delta_nll, r.delta_nll, -1, 0,
        "simulator: the ΔNLL it charges; replay: measured, the receiver's NLL of the source's "
        "greedy continuation minus the source's");
    add("greedy_agreement", "share", {}, r.agreement, -1, 0,
        "replay only: share of the continuation's greedy tokens equal to the source's");
  }
  return rows;
}

nlohmann::json strategy_ranking(const std::vector<FidelityRow>& rows, const std::string& metric) {
  std::vector<std::pair<double, std::string>> sim_order, replay_order;
  for (const FidelityRow& r : rows) {
    if (r.metric != metric) continue;
    sim_order.emplace_back(r.simulated, r.strategy);
    replay_order.emplace_back(r.replayed, r.strategy);
  }
  auto names = [](std::vector<std::pair<double, std::string>> v) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return !std::isnan(a.first) && (std::isnan(b.first) || a.first < b.first);
    });
    std::vector<std::string> out;
    for (const auto& [value, name] : v) out.push_back(name);
    return out;
  };
  const auto s = names(sim_order), r = names(replay_order);
  return {{"metric", metric}, {"simulator", s}, {"replay", r}, {"identical", s == r}};
}

std::string fidelity_csv(const std::vector<FidelityRow>& rows) {
  std::ostringstream out;
  out << "strategy,metric,unit,simulated,replayed,simulated_n,replayed_n,error,target,note\n";
  for (const FidelityRow& r : rows) {
    out << r.strategy << ',' << r.metric << ',' << r.unit << ',' << cell(r.simulated, "%.9g") << ','
        << cell(r.replayed, "%.9g") << ',' << r.simulated_n << ',' << r.replayed_n << ','
        << cell(r.error, "%.6g") << ',' << cell(r.target, "%.2f") << ",\"" << r.note << "\"\n";
  }
  return out.str();
}

std::string fidelity_markdown(const std::vector<FidelityRow>& rows) {
  std::ostringstream out;
  out << "| strategy | metric | simulator | replay | n (sim / replay) | error | target | why "
         "/ note |\n"
      << "|---|---|---|---|---|---|---|---|\n";
  for (const FidelityRow& r : rows) {
    const bool bytes = r.unit == "B";
    const char* fmt = bytes ? "%.0f" : "%.4g";
    std::string verdict = "–";
    if (r.target > 0 && !std::isnan(r.error)) {
      verdict = format_number("%.0f %%", 100 * r.target) +
                (std::abs(r.error) <= r.target ? " met" : " missed");
    }
    out << "| " << r.strategy << " | " << r.metric << " (" << r.unit << ") | "
        << cell(r.simulated, fmt) << " | " << cell(r.replayed, fmt) << " | " << r.simulated_n
        << " / " << r.replayed_n << " | "
        << (std::isnan(r.error) ? std::string("–") : format_number("%+.1f %%", 100 * r.error))
        << " | " << verdict << " | " << (r.note.empty() ? "–" : r.note) << " |\n";
  }
  return out.str();
}

}  // namespace kvshift::testbed
