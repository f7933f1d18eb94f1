// Cross-fitted selection against a counting oracle: no request is ever used both
// to order the groups and to gate a prefix, every gate request gates every
// measured prefix, the order is the order set's, the stopping rule, and the
// in-sample mode (no order set) is flagged as not cross-fitted.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backend/calibrate/crossfit.hpp"

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

}  // namespace
}  // namespace kvshift::backend::calibrate
