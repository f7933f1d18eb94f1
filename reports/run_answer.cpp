// The run's answer (see run_answer.hpp): a strict order on failed requests and unfinished
// moves first, since a strategy that strands a drain or loses requests is not better for being
// fast on the moves it finished; latency decides only among strategies level on both.
#include "reports/run_answer.hpp"
#include "cost_model/units.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace kvshift::reports {
namespace {

std::string count(std::int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// One strategy as the answer ranks it.
struct Entry {
  const NamedMetrics* n;
  const Distribution* latency;  // all moves, or TTFT in a disaggregated run

  const std::string& name() const { return n->strategy; }
  const StrategyMetrics& m() const { return n->metrics; }
  std::int64_t failed() const { return m().requests.failed; }
  std::int64_t unfinished() const { return m().moves.unfinished; }
  // A measured mean below 0 is the measurement's noise: it ranks as no loss, never above a
  // lossless strategy.
  double delta_nll() const { return std::max(0.0, m().quality.delta_nll_mean_per_move); }
  bool timed() const { return latency->count > 0; }
  bool bound() const { return latency->includes_lower_bounds; }
  double p99() const { return latency->p99_s; }
  std::string p99_text() const { return (bound() ? ">" : "") + format_latency(p99()); }
  std::int64_t done_moves() const {
    return m().moves.recoveries + m().moves.migrations + m().moves.handoffs.value_or(0);
  }
};

// Among strategies level on failed requests and unfinished moves: those with moves first, then
// by p99, then by ΔNLL per move.
bool faster(const Entry& a, const Entry& b) {
  if (a.timed() != b.timed()) return a.timed();
  if (a.timed() && a.p99() != b.p99()) return a.p99() < b.p99();
  return a.delta_nll() < b.delta_nll();
}

bool better(const Entry& a, const Entry& b) {
  if (a.failed() != b.failed()) return a.failed() < b.failed();
  if (a.unfinished() != b.unfinished()) return a.unfinished() < b.unfinished();
  return faster(a, b);
}

// A ΔNLL source in a few words: "scenario constant, not measured", or "measured in FILE".
std::string short_source(const std::string& source) {
  const std::string constant = "scenario constant, not measured";
  if (source.starts_with(constant)) return constant;
  std::string path = source.substr(0, source.find(" ("));
  path = path.substr(0, path.find(": "));
  const auto slash = path.find_last_of('/');
  return "measured in " + (slash == std::string::npos ? path : path.substr(slash + 1));
}

// What a strategy's moves cost in quality, with where each ΔNLL it used comes from (its
// deployments' methods in a run that serves several models).
std::string quality_cost(const Entry& e) {
  if (e.delta_nll() <= 0) return "";
  std::vector<std::string> sources;
  const auto& ran = e.m().moves.by_strategy;
  auto add = [&](const Quality& q) {
    auto one = [&](const char* method, const std::string& source) {
      const std::string text = std::string(method) + ": " + short_source(source);
      if (ran.count(method) && std::find(sources.begin(), sources.end(), text) == sources.end()) {
        sources.push_back(text);
      }
    };
    if (q.risk_kv_charge) one("risk_kv", q.risk_kv_charge->source);
    if (q.proxy_kv) one("proxy_kv", q.proxy_kv->delta_nll_source);
  };
  add(e.m().quality);
  for (const auto& [name, d] : e.m().deployments) add(d.quality);
  std::string list;
  for (const std::string& t : sources) list += (list.empty() ? " (" : "; ") + t;
  return "; " + e.name() + "'s moves cost ΔNLL " + format_number("%.5f", e.delta_nll()) +
         " nats/token on average" + (list.empty() ? "" : list + ")");
}

// Unfinished moves and fallbacks of a strategy the sentence names.
std::string caveats(const Entry& e, bool unfinished_said) {
  std::string out;
  if (e.unfinished() > 0 && !unfinished_said) {
    out += "; " + std::to_string(e.unfinished()) + " of " + e.name() +
           "'s moves were unfinished at the end (counted at their lower bound)";
  }
  const std::int64_t fell = e.m().moves.fallbacks;
  if (fell > 0 && fell >= e.done_moves()) {
    std::string ran;
    for (const auto& [strategy, k] : e.m().moves.by_strategy) {
      ran += (ran.empty() ? "" : ", ") + strategy + " " + std::to_string(k);
    }
    out += "; all " + std::to_string(fell) + " of " + e.name() +
           "'s finished moves fell back to another strategy and ran as " + ran +
           ", so its latencies measure that, not " + e.name();
  } else if (fell > 0) {
    out += "; " + std::to_string(fell) + " of " + e.name() + "'s " +
           std::to_string(e.done_moves()) + " finished moves fell back to another strategy";
  }
  return out + quality_cost(e);
}

std::string only_strategy(const Entry& e, const std::string& criterion) {
  const MoveCounts& mv = e.m().moves;
  std::string moves = count(e.done_moves(), "finished move", "finished moves") + " (" +
                      count(mv.recoveries, "recovery", "recoveries") + ", " +
                      count(mv.migrations, "migration", "migrations") +
                      (mv.handoffs ? ", " + count(*mv.handoffs, "handoff", "handoffs") : "") + ")";
  std::string out = "Only " + e.name() + " was run, so nothing is ranked: " + moves;
  if (e.unfinished() > 0) out += " and " + std::to_string(e.unfinished()) + " unfinished";
  if (e.timed()) out += ", " + criterion + " " + e.p99_text();
  out += ", " + count(e.failed(), "failed request", "failed requests");
  return out + caveats(e, true) + ".";
}

std::string names(const std::vector<Entry>& es) {
  std::string out;
  for (std::size_t i = 0; i < es.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == es.size() ? " and " : ", ") + es[i].name();
  }
  return out;
}

// Why `w` is ahead of `r`, the best of those that failed more requests or left more moves
// unfinished.
std::string ahead_on_counts(const Entry& w, const Entry& r, const std::string& criterion) {
  std::string out = w.name() + " is ahead: ";
  if (r.failed() > w.failed()) {
    out += "fewest failed requests (" + std::to_string(w.failed()) + " against " +
           std::to_string(r.failed()) + " for " + r.name() + ")";
  } else {
    out += "fewest moves unfinished at the end (" + std::to_string(w.unfinished()) + " against " +
           std::to_string(r.unfinished()) + " for " + r.name() + ")";
  }
  if (w.timed()) {
    out += "; its " + criterion + " is " + w.p99_text();
    if (r.timed()) out += " against " + r.p99_text() + " for " + r.name();
  }
  return out;
}

// The sentence's head when several strategies are level on failed requests and unfinished
// moves: latency (exact values only) and then ΔNLL decide.
std::string among_level(const std::vector<Entry>& level, const std::string& criterion,
                        std::vector<std::string>& ahead) {
  const Entry& w = level[0];
  const Entry& n = level[1];
  if (!w.timed()) {
    for (const Entry& e : level) ahead.push_back(e.name());
    return names(level) + " are level: none made a move, and each failed " +
           count(w.failed(), "request", "requests");
  }
  if (!n.timed()) {
    ahead = {w.name(), n.name()};
    return w.name() + " and " + n.name() + " are level on failed requests and unfinished moves; " +
           n.name() + " made no move to compare (" + w.name() + "'s " + criterion + " is " +
           w.p99_text() + ")";
  }
  if (w.bound()) {
    ahead = {w.name(), n.name()};
    return w.name() + " and " + n.name() + " cannot be ranked: each failed " +
           count(w.failed(), "request", "requests") + " and left " +
           count(w.unfinished(), "move", "moves") + " unfinished at the end, so their " +
           criterion + " (" + w.p99_text() + " and " + n.p99_text() + ") are lower bounds";
  }
  if (!n.bound() && n.p99() - w.p99() <= 0.005 * n.p99()) {
    ahead = {w.name(), n.name()};
    const std::string a = w.p99_text(), b = n.p99_text();
    std::string out = w.name() + " and " + n.name() + " tie on the " + criterion + ": " +
                      (a == b ? a : a + " and " + b);
    const Entry& purer = w.delta_nll() <= n.delta_nll() ? w : n;
    const Entry& lossier = w.delta_nll() <= n.delta_nll() ? n : w;
    if (purer.delta_nll() < lossier.delta_nll()) {
      out += "; " + purer.name() + " loses less quality (ΔNLL " +
             format_number("%.5f", purer.delta_nll()) + " against " +
             format_number("%.5f", lossier.delta_nll()) + " nats/token per move)";
    }
    return out;
  }
  ahead = {w.name()};
  const double pct = 100.0 * (n.p99() - w.p99()) / n.p99();
  std::string out = w.name() + " is ahead on the " + criterion + ": " + w.p99_text() + " against " +
                    n.p99_text() + " for " + n.name();
  if (!n.bound()) return out + " (" + format_number("%.0f", pct) + " % lower)";
  if (pct >= 1) return out + " (at least " + format_number("%.0f", pct) + " % lower)";
  return out + " (" + n.name() + "'s is a lower bound)";
}

// A strategy behind on failed requests or unfinished moves whose p99 is nonetheless lower
// (exact values only: a lower bound below w's says nothing).
std::string faster_behind(const Entry& w, const std::vector<Entry>& rest,
                          const std::string& criterion) {
  for (const Entry& r : rest) {
    if (!r.timed() || !w.timed() || r.bound() || r.p99() >= w.p99()) continue;
    return "; " + r.name() + "'s " + criterion + " is lower (" + r.p99_text() + ") but it " +
           (r.failed() > w.failed()
                ? "failed " + count(r.failed(), "request", "requests")
                : "left " + count(r.unfinished(), "move", "moves") + " unfinished");
  }
  return "";
}

// The sentence when no strategy moved anything and all failed alike, or nullopt.
std::optional<std::string> no_moves(const std::vector<Entry>& entries) {
  for (const Entry& e : entries) {
    if (e.timed() || e.unfinished() > 0 || e.failed() != entries[0].failed()) return std::nullopt;
  }
  const std::int64_t failed = entries[0].failed();
  return "No moves happened in this run" +
         (failed > 0 ? " (each strategy failed " + count(failed, "request", "requests") + ")"
                     : std::string()) +
         ": the strategies differ only in what they stream.";
}

// One strategy failed fewest requests, another left fewest moves unfinished (`sorted` by
// better): no strategy is ahead on both.
std::string nobody_ahead(const std::vector<Entry>& sorted) {
  const Entry& a = sorted.front();
  const Entry& b = *std::min_element(sorted.begin(), sorted.end(), [](auto& x, auto& y) {
    return x.unfinished() != y.unfinished() ? x.unfinished() < y.unfinished()
                                            : x.failed() < y.failed();
  });
  return "No strategy is ahead on every count: " + a.name() + " failed the fewest requests (" +
         std::to_string(a.failed()) + " against " + std::to_string(b.failed()) + " for " +
         b.name() + ") but " + b.name() + " left the fewest moves unfinished at the end (" +
         std::to_string(b.unfinished()) + " against " + std::to_string(a.unfinished()) + ")";
}

}  // namespace

std::string format_latency(double s) {
  if (s < 0.01) return format_number("%.3f ms", s * 1e3);
  if (s < 1.0) return format_number("%.1f ms", s * 1e3);
  return format_number("%.3f s", s);
}

RunAnswer run_answer(const std::vector<NamedMetrics>& all) {
  if (all.empty()) return {{}, "No strategy was run."};
  // Disaggregated, every request's KV moves once and the handoff lands in its TTFT.
  const bool pd = std::any_of(all.begin(), all.end(),
                              [](const NamedMetrics& n) { return n.metrics.handoff.has_value(); });
  const std::string criterion = pd ? "TTFT p99" : "p99 of all moves";
  std::vector<Entry> entries;
  for (const NamedMetrics& n : all) {
    entries.push_back({&n, pd ? &n.metrics.ttft : &n.metrics.all_moves});
  }
  if (entries.size() == 1) return {{}, only_strategy(entries[0], criterion)};
  if (!pd) {
    if (auto none = no_moves(entries)) return {{}, *none};
  }
  std::stable_sort(entries.begin(), entries.end(), better);
  const std::int64_t fewest_failed = entries.front().failed();
  std::int64_t fewest_open = entries.front().unfinished();
  for (const Entry& e : entries) fewest_open = std::min(fewest_open, e.unfinished());
  const std::string rule =
      ". Ranked by failed requests, then moves unfinished at the end, then the " +
      (pd ? std::string("TTFT p99 (the handoff included)")
          : std::string("p99 of all moves (recoveries and migrations together)")) +
      ", then ΔNLL per move";
  std::vector<Entry> level, rest;
  for (const Entry& e : entries) {
    (e.failed() == fewest_failed && e.unfinished() == fewest_open ? level : rest).push_back(e);
  }
  if (level.empty()) return {{}, nobody_ahead(entries) + rule + "."};
  RunAnswer answer;
  std::string head;
  if (level.size() == 1) {
    answer.ahead = {level[0].name()};
    head = ahead_on_counts(level[0], rest.front(), criterion);
  } else {
    head = among_level(level, criterion, answer.ahead);
    head += faster_behind(level[0], rest, criterion);
  }
  std::string tail;
  for (const Entry& e : level) {
    if (std::find(answer.ahead.begin(), answer.ahead.end(), e.name()) == answer.ahead.end()) {
      continue;
    }
    // "cannot be ranked" already says how many moves were unfinished.
    tail += caveats(e, head.find("cannot be ranked") != std::string::npos);
  }
  answer.text = head + tail + rule + ".";
  return answer;
}

}  // namespace kvshift::reports
