// Cross-fitted selection against a counting oracle: no request is ever used both
// to order the groups and to gate a prefix, every gate request gates every
// measured prefix, the order is the order set's, the stopping rule, and the
// in-sample mode (no order set) is flagged as not cross-fitted.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backend/calibrate/crossfit.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

/// Per request: ΔNLL of a topology = sum of its groups' risks, where the order set sees
/// group risks `order_risk` and every other request `gate_risk`; counts every use.
class CountingOracle final : public SelectionOracle {
 public:
  std::map<int, double> order_risk, gate_risk;
  std::set<std::size_t> order_ids;
  std::map<std::size_t, int> single_uses, prefix_uses;  // per request
  int max_feasible = 100;

  std::vector<std::vector<double>> measure(const std::vector<std::vector<int>>& topologies,
                                           const std::vector<std::size_t>& requests) override {
    std::vector<std::vector<double>> d;
    for (const auto& t : topologies) {
      std::vector<double> row;
      for (std::size_t r : requests) {
        double v = 0.0;
        for (int g : t) v += (order_ids.contains(r) ? order_risk : gate_risk).at(g);
        row.push_back(v + 1e-4 * static_cast<double>(r % 3));
      }
      d.push_back(row);
    }
    // The first call measures the singles; every later call a prefix.
    for (std::size_t r : requests) (first_call_ ? single_uses : prefix_uses)[r] += 1;
    first_call_ = false;
    return d;
  }
  bool feasible(const std::vector<int>& groups) const override {
    return static_cast<int>(groups.size()) <= max_feasible;
  }
  double saved_bytes(const std::vector<int>& groups) const override {
    return 100.0 * static_cast<double>(groups.size());
  }

 private:
  bool first_call_ = true;
};

SelectionInput input() {
  SelectionInput in;
  in.candidates = {2, 3, 4, 5, 6};
  in.order_requests = {0, 1, 2, 3};
  in.gate_requests = {4, 5, 6, 7, 8, 9, 10, 11};
  in.rules = {GateRule(Gate::kMean), GateRule(Gate::kUpper90)};
  in.eps_max = 0.01;
  return in;
}

TEST(CrossFit, NoRequestBothOrdersAndGates) {
  CountingOracle o;
  SelectionInput in = input();
  o.order_ids = {in.order_requests.begin(), in.order_requests.end()};
  for (int g : in.candidates) o.order_risk[g] = o.gate_risk[g] = 0.0001 * g;
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_TRUE(s.cross_fitted);
  ASSERT_EQ(s.prefixes.size(), 5u);
  // Singles: every order request in the one batched singles call, no other request.
  EXPECT_EQ(o.single_uses.size(), in.order_requests.size());
  for (std::size_t r : in.order_requests) {
    EXPECT_EQ(o.single_uses[r], 1) << r;
    EXPECT_FALSE(o.prefix_uses.contains(r)) << "order request " << r << " gated a prefix";
  }
  // Prefixes: every gate request in every prefix measurement, none of them ordered.
  EXPECT_EQ(o.prefix_uses.size(), in.gate_requests.size());
  for (std::size_t r : in.gate_requests) {
    EXPECT_EQ(o.prefix_uses[r], 5) << r;
    EXPECT_FALSE(o.single_uses.contains(r)) << "gate request " << r << " ordered the groups";
  }
  for (const PrefixOutcome& p : s.prefixes) EXPECT_EQ(p.deltas.size(), 8u);
}

TEST(CrossFit, TheOrderComesFromTheOrderSetAndTheGateFromTheOther) {
  CountingOracle o;
  SelectionInput in = input();
  o.order_ids = {in.order_requests.begin(), in.order_requests.end()};
  // On the order set G6 looks best and G2 worst; on the gate set G6 is in fact bad.
  o.order_risk = {{2, 0.004}, {3, 0.003}, {4, 0.002}, {5, 0.001}, {6, -0.001}};
  o.gate_risk = {{2, 0.004}, {3, 0.003}, {4, 0.002}, {5, 0.001}, {6, 0.05}};
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_EQ(s.order, (std::vector<int>{6, 5, 4, 3, 2}));
  // Prefix 1 = {G6} is measured on the gate set, where it fails: the winner's curse shows.
  EXPECT_GT(s.prefixes.front().mean, 0.04);
  EXPECT_FALSE(choose_prefix(s.prefixes, Gate::kMean, 0.01).has_value());
  // Every prefix contains G6, fails at eps_max: two in a row and the measuring stops.
  EXPECT_EQ(s.prefixes.size(), 2u);
  EXPECT_NE(s.stop_reason.find("pass no gate"), std::string::npos) << s.stop_reason;
}

TEST(CrossFit, InfeasiblePrefixesStopTheSearch) {
  CountingOracle o;
  SelectionInput in = input();
  o.order_ids = {in.order_requests.begin(), in.order_requests.end()};
  for (int g : in.candidates) o.order_risk[g] = o.gate_risk[g] = 0.0;
  o.max_feasible = 3;
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_EQ(s.prefixes.size(), 3u);
  EXPECT_NE(s.stop_reason.find("anchors"), std::string::npos);
}

TEST(CrossFit, WithoutAnOrderSetTheOrderIsInSample) {
  CountingOracle o;
  SelectionInput in = input();
  in.order_requests.clear();
  for (int g : in.candidates) o.order_risk[g] = o.gate_risk[g] = 0.0001 * g;
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_FALSE(s.cross_fitted);
  for (std::size_t r : in.gate_requests) {
    EXPECT_EQ(o.single_uses[r], 1);
    EXPECT_EQ(o.prefix_uses[r], 5);
  }
}

TEST(CrossFit, OverlappingSetsAreRejected) {
  CountingOracle o;
  SelectionInput in = input();
  in.order_requests.push_back(in.gate_requests.front());
  EXPECT_THROW(select_prefixes(o, in), std::invalid_argument);
  in = input();
  in.confirm_requests = {2};
  EXPECT_THROW(select_prefixes(o, in), std::invalid_argument);
}

/// ΔNLL of a topology on every request: the sum of its groups' risks plus `penalty` for every
/// two neighbouring groups omitted together (a run rebuilt from anchors further away). Logs
/// every topology measured and the requests it was measured on.
class NeighbourOracle final : public SelectionOracle {
 public:
  std::map<int, double> risk;
  double penalty = 0.0;
  std::set<std::pair<int, int>> infeasible_pairs;
  std::vector<std::vector<int>> measured;
  std::vector<std::vector<std::size_t>> measured_on;

  double cost(const std::vector<int>& groups) const {
    double v = 0.0;
    for (int g : groups) v += risk.at(g);
    for (int a : groups) {
      for (int b : groups) v += b == a + 1 ? penalty : 0.0;
    }
    return v;
  }
  std::vector<std::vector<double>> measure(const std::vector<std::vector<int>>& topologies,
                                           const std::vector<std::size_t>& requests) override {
    std::vector<std::vector<double>> d;
    for (const auto& t : topologies) {
      d.emplace_back(requests.size(), cost(t));
      measured.push_back(t);
      measured_on.push_back(requests);
    }
    return d;
  }
  bool feasible(const std::vector<int>& groups) const override {
    for (int a : groups) {
      for (int b : groups) {
        if (infeasible_pairs.contains({a, b})) return false;
      }
    }
    return true;
  }
  double saved_bytes(const std::vector<int>& groups) const override {
    return 100.0 * static_cast<double>(groups.size());
  }
};

SelectionInput greedy_input() {
  SelectionInput in = input();
  in.order_rule = OrderRule::kGreedy;
  return in;
}

TEST(GreedyOrder, WithoutInteractionsItIsTheRiskPerByteOrderAtOneMeasurePerGroup) {
  // Metamorphic: when joint costs add up, beside-the-choice costs equal the singles', so the
  // lazy greedy takes the singles' order and re-measures each group once (the first is taken).
  NeighbourOracle o;
  o.risk = {{2, 0.0030}, {3, -0.0004}, {4, 0.0011}, {5, 0.0002}, {6, 0.0013}};
  const SelectionOutcome s = select_prefixes(o, greedy_input());
  EXPECT_EQ(s.order, order_by_risk_per_byte(s.singles));
  EXPECT_EQ(s.order, (std::vector<int>{3, 5, 4, 6, 2}));
  EXPECT_EQ(s.order_measurements, 4);
  ASSERT_EQ(s.order_means.size(), 5u);
  double sum = 0.0;
  for (std::size_t k = 0; k < 5; ++k) {
    sum += o.risk.at(s.order[k]);
    EXPECT_NEAR(s.order_means[k], sum, 1e-15) << k;
  }
}

TEST(GreedyOrder, NeighboursOmittedTogetherAreTakenLast) {
  NeighbourOracle o;
  o.risk = {{2, 0.0010}, {3, 0.0011}, {4, 0.0012}, {5, 0.0050}, {6, 0.0060}};
  o.penalty = 0.01;
  SelectionInput in = greedy_input();
  in.order_stop = 1.0;
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_EQ(order_by_risk_per_byte(s.singles), (std::vector<int>{2, 3, 4, 5, 6}));
  // G3 beside G2 costs the penalty, G4 does not; then G5 beside G4 does, G6 does not; of the
  // two left, G3 adds 0.0211 beside {2, 4, 6}, G5 0.025.
  EXPECT_EQ(s.order, (std::vector<int>{2, 4, 6, 3, 5}));
  ASSERT_EQ(s.order_means.size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    const std::vector<int> prefix(s.order.begin(), s.order.begin() + static_cast<long>(k) + 1);
    EXPECT_NEAR(s.order_means[k], o.cost(prefix), 1e-15) << k;
  }
  // The gated prefixes are the greedy order's.
  ASSERT_FALSE(s.prefixes.empty());
  EXPECT_EQ(s.prefixes[1].groups, (std::vector<int>{2, 4}));
  EXPECT_NEAR(s.prefixes[1].mean, o.cost({2, 4}), 1e-15);
}

TEST(GreedyOrder, OrdersOnTheOrderSetOnly) {
  NeighbourOracle o;
  o.risk = {{2, 0.0010}, {3, 0.0011}, {4, 0.0012}, {5, 0.0050}, {6, 0.0060}};
  o.penalty = 0.01;
  const SelectionInput in = greedy_input();
  const SelectionOutcome s = select_prefixes(o, in);
  // The singles, then the greedy's measurements: on the order requests; then the prefixes: on
  // the gate requests.
  const std::size_t ordering =
      in.candidates.size() + static_cast<std::size_t>(s.order_measurements);
  ASSERT_GT(o.measured_on.size(), ordering);
  for (std::size_t i = 0; i < o.measured_on.size(); ++i) {
    EXPECT_EQ(o.measured_on[i], i < ordering ? in.order_requests : in.gate_requests) << i;
  }
  EXPECT_TRUE(s.cross_fitted);
}

TEST(GreedyOrder, StopsMeasuringPastTheStopAndKeepsEveryCandidate) {
  NeighbourOracle o;
  o.risk = {{2, 0.0010}, {3, 0.0011}, {4, 0.0012}, {5, 0.0050}, {6, 0.0060}};
  o.penalty = 0.01;
  SelectionInput in = greedy_input();
  in.order_stop = 0.002;  // passed once {2, 4} is chosen (0.0022)
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_EQ(s.order_means.size(), 2u);
  EXPECT_EQ(s.order_measurements, 2);  // G3 and G4 beside {2}
  // The rest by their last measured cost per byte: G5 and G6 alone, G3 beside G2.
  EXPECT_EQ(s.order, (std::vector<int>{2, 4, 5, 6, 3}));
}

TEST(GreedyOrder, InfeasibleGroupsGoLast) {
  NeighbourOracle o;
  o.risk = {{2, 0.0010}, {3, 0.0011}, {4, 0.0012}, {5, 0.0050}, {6, 0.0060}};
  o.infeasible_pairs = {{2, 3}};
  SelectionInput in = greedy_input();
  in.order_stop = 1.0;
  const SelectionOutcome s = select_prefixes(o, in);
  EXPECT_EQ(s.order, (std::vector<int>{2, 4, 5, 6, 3}));
  EXPECT_EQ(s.order_means.size(), 4u);
  // Prefix 5 holds G2 and G3: the search stops there, as with the risk-per-byte order.
  EXPECT_EQ(s.prefixes.size(), 4u);
  EXPECT_NE(s.stop_reason.find("anchors"), std::string::npos) << s.stop_reason;
}

TEST(GreedyOrder, NamesParseAndBadOnesNameTheFlag) {
  EXPECT_EQ(parse_order_rule("greedy", "--order"), OrderRule::kGreedy);
  EXPECT_EQ(parse_order_rule("risk-per-byte", "--order"), OrderRule::kRiskPerByte);
  EXPECT_EQ(to_string(OrderRule::kGreedy), "greedy");
  try {
    parse_order_rule("lazy", "--order");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--order"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvshift::backend::calibrate
