// Cross-fitted selection; see crossfit.hpp.
#include "backend/calibrate/crossfit.hpp"

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace kvshift::backend::calibrate {

std::string_view to_string(OrderRule r) {
  return r == OrderRule::kGreedy ? "greedy" : "risk-per-byte";
}

OrderRule parse_order_rule(std::string_view name, const std::string& flag) {
  if (name == "risk-per-byte") return OrderRule::kRiskPerByte;
  if (name == "greedy") return OrderRule::kGreedy;
  throw InputError(flag + ": expected risk-per-byte or greedy (got '" + std::string(name) + "')");
}

namespace {

/// The lazy greedy order (OrderRule::kGreedy) on `order_set`, from the singles' costs.
void greedy_order(SelectionOracle& oracle, const SelectionInput& in,
                  const std::vector<std::size_t>& order_set, SelectionOutcome& out) {
  struct Candidate {
    int group = 0;
    double key = 0.0;        ///< ΔNLL per saved byte beside the choice of size `beside`
    double mean = 0.0;       ///< mean ΔNLL of the choice with it
    std::size_t beside = 0;  ///< size of the choice it was measured beside
  };
  std::vector<Candidate> open;
  for (const SingleRisk& s : out.singles) {
    open.push_back({s.group, s.risk / std::max(s.saved_bytes, 1.0), s.risk, 0});
  }
  std::vector<int> chosen, dropped;
  double chosen_mean = 0.0;  // nothing omitted: ΔNLL 0 by definition
  auto cheapest = [&] {
    return std::min_element(open.begin(), open.end(), [](const Candidate& a, const Candidate& b) {
      return a.key != b.key ? a.key < b.key : a.group < b.group;
    });
  };
  while (!open.empty() && chosen_mean <= in.order_stop) {
    const auto top = cheapest();
    if (top->beside == chosen.size()) {  // measured beside the current choice: take it
      chosen.push_back(top->group);
      chosen_mean = top->mean;
      out.order_means.push_back(chosen_mean);
      open.erase(top);
      continue;
    }
    std::vector<int> with = chosen;
    with.push_back(top->group);
    if (!oracle.feasible(with)) {  // the choice only grows: it stays infeasible
      dropped.push_back(top->group);
      open.erase(top);
      continue;
    }
    top->mean = mean_of(oracle.measure({with}, order_set).front());
    ++out.order_measurements;
    const double bytes = oracle.saved_bytes(with) - oracle.saved_bytes(chosen);
    top->key = (top->mean - chosen_mean) / std::max(bytes, 1.0);
    top->beside = chosen.size();
  }
  out.order = std::move(chosen);
  // Past the stop, by the last cost measured; the infeasible ones last.
  while (!open.empty()) {
    const auto top = cheapest();
    out.order.push_back(top->group);
    open.erase(top);
  }
  out.order.insert(out.order.end(), dropped.begin(), dropped.end());
}

}  // namespace

SelectionOutcome select_prefixes(SelectionOracle& oracle, const SelectionInput& in) {
  if (in.gate_requests.empty() || in.candidates.empty()) {
    throw std::invalid_argument("select_prefixes: needs candidates and gate requests");
  }
  for (std::size_t r : in.order_requests) {
    if (std::find(in.gate_requests.begin(), in.gate_requests.end(), r) != in.gate_requests.end() ||
        std::find(in.confirm_requests.begin(), in.confirm_requests.end(), r) !=
            in.confirm_requests.end()) {
      throw std::invalid_argument("select_prefixes: request " + std::to_string(r) +
                                  " is in the order set and in a gating set");
    }
  }
  SelectionOutcome out;
  out.cross_fitted = !in.order_requests.empty();
  const auto& order_set = out.cross_fitted ? in.order_requests : in.gate_requests;

  // Singles on the order set.
  std::vector<std::vector<int>> singles;
  for (int g : in.candidates) singles.push_back({g});
  out.single_deltas = oracle.measure(singles, order_set);
  for (std::size_t i = 0; i < in.candidates.size(); ++i) {
    out.singles.push_back(
        {in.candidates[i], mean_of(out.single_deltas[i]), oracle.saved_bytes(singles[i])});
  }
  if (in.order_rule == OrderRule::kGreedy) {
    greedy_order(oracle, in, order_set, out);
  } else {
    out.order = order_by_risk_per_byte(out.singles);
  }

  // Prefixes on the gate set (and the confirmation set), one k at a time.
  std::vector<std::size_t> requests = in.gate_requests;
  requests.insert(requests.end(), in.confirm_requests.begin(), in.confirm_requests.end());
  const std::size_t n_gate = in.gate_requests.size();
  int rejected_in_a_row = 0;
  out.stop_reason = "every prefix measured";
  for (std::size_t k = 1; k <= out.order.size(); ++k) {
    const std::vector<int> groups(out.order.begin(), out.order.begin() + static_cast<long>(k));
    if (!oracle.feasible(groups)) {
      out.stop_reason = "prefix " + std::to_string(k) + " leaves a group without anchors";
      break;
    }
    const std::vector<double> d = oracle.measure({groups}, requests).front();
    PrefixOutcome p;
    p.groups = groups;
    p.omitted_bytes = oracle.saved_bytes(groups);
    p.deltas.assign(d.begin(), d.begin() + static_cast<long>(n_gate));
    p.mean = mean_of(p.deltas);
    p.upper90 = bootstrap_upper(p.deltas, 0.9, in.resamples, in.seed + 1);
    if (!in.confirm_requests.empty()) {
      const std::vector<double> c(d.begin() + static_cast<long>(n_gate), d.end());
      p.confirm_upper90 = bootstrap_upper(c, 0.9, in.resamples, in.seed + 2);
    }
    const bool any = std::any_of(in.rules.begin(), in.rules.end(),
                                 [&](const GateRule& r) { return passes(p, r, in.eps_max); });
    out.prefixes.push_back(std::move(p));
    rejected_in_a_row = any ? 0 : rejected_in_a_row + 1;
    if (rejected_in_a_row >= in.patience && k < out.order.size()) {
      out.stop_reason = "prefixes " + std::to_string(k - rejected_in_a_row + 1) + ".." +
                        std::to_string(k) + " pass no gate at eps " + format_g(in.eps_max);
      break;
    }
  }
  return out;
}

}  // namespace kvshift::backend::calibrate
