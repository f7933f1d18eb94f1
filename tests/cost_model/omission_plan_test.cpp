#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "cost_model/omission_plan.hpp"

namespace kvshift::cost_model {
namespace {

using Layers = std::vector<int>;

TEST(OmissionPlan, PaperTopologiesUseTheNearestKeptGroupsAsAnchors) {
  const OmissionPlan q05 = OmissionPlan::parse("paper", find_model("qwen2.5-0.5b"));
  ASSERT_EQ(q05.groups().size(), 4u);
  EXPECT_EQ(q05.describe(), "G2,G3,G4,G5");
  for (const GroupPlan& g : q05.groups()) EXPECT_EQ(g.anchor_layers, (Layers{0, 1, 10, 11}));
  EXPECT_EQ(q05.groups()[0].target_layers, (Layers{2, 3}));
  EXPECT_EQ(q05.omitted_layers(), 8);

  const OmissionPlan q15 = OmissionPlan::parse("paper", find_model("qwen2.5-1.5b"));
  EXPECT_EQ(q15.describe(), "G2,G3,G5,G6");
  EXPECT_EQ(q15.groups()[0].anchor_layers, (Layers{0, 1, 6, 7}));
  EXPECT_EQ(q15.groups()[2].anchor_layers, (Layers{6, 7, 12, 13}));

  const OmissionPlan tl = OmissionPlan::parse("paper", find_model("tinyllama-1.1b"));
  EXPECT_EQ(tl.groups()[0].anchor_layers, (Layers{0, 1, 4, 5}));
  EXPECT_EQ(tl.groups()[1].anchor_layers, (Layers{6, 7, 10, 11}));
}

TEST(OmissionPlan, ParsesListsAndRanges) {
  const ModelSpec& m = find_model("qwen2.5-0.5b");
  EXPECT_EQ(OmissionPlan::parse("G2-G5", m).describe(), "G2,G3,G4,G5");
  EXPECT_EQ(OmissionPlan::parse("G5,G2", m).describe(), "G2,G5");
  EXPECT_EQ(OmissionPlan::parse("3", m).describe(), "G3");
  EXPECT_TRUE(OmissionPlan::parse("none", m).empty());
}

TEST(OmissionPlan, AnchorsDependOnTheWholeSet) {
  const ModelSpec& m = find_model("qwen2.5-0.5b");
  EXPECT_EQ(OmissionPlan::parse("G3", m).groups()[0].anchor_layers, (Layers{2, 3, 6, 7}));
  EXPECT_EQ(OmissionPlan::parse("G3,G4", m).groups()[0].anchor_layers, (Layers{2, 3, 8, 9}));
}

TEST(OmissionPlan, WidthsAreConfigurable) {
  const ModelSpec& m = find_model("qwen2.5-0.5b");
  const OmissionPlan t = OmissionPlan::parse("G2", m, {3, 1});
  EXPECT_EQ(t.groups()[0].target_layers, (Layers{3, 4, 5}));
  EXPECT_EQ(t.groups()[0].anchor_layers, (Layers{2, 6}));
}

std::string error_of(const std::string& text, const char* model = "tinyllama-1.1b") {
  try {
    OmissionPlan::parse(text, find_model(model));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OmissionPlan, InvalidTopologiesSayWhichGroupAndWhy) {
  EXPECT_NE(error_of("G1").find("G1 has 0 kept layer(s) on its left"), std::string::npos);
  EXPECT_NE(error_of("G11").find("on its right"), std::string::npos);
  EXPECT_NE(error_of("G12").find("G12 is out of range"), std::string::npos);
  EXPECT_NE(error_of("G2,G2").find("G2 is listed more than once"), std::string::npos);
  EXPECT_NE(error_of("G2,X").find("\"X\""), std::string::npos);
  EXPECT_NE(error_of("G5-G2").find("backwards"), std::string::npos);
  EXPECT_NE(error_of("paper", "smollm2-135m").find("no topology"), std::string::npos);
}

TEST(OmissionPlan, ExplicitPlansAreValidated) {
  EXPECT_NO_THROW(OmissionPlan::from_plans(22, {{2, {2, 3}, {0, 1, 4, 5}}}));
  EXPECT_THROW(OmissionPlan::from_plans(22, {{2, {2, 3}, {0, 3}}}), InputError);  // anchor omitted
  EXPECT_THROW(OmissionPlan::from_plans(22, {{2, {2, 3}, {0, 1}}, {3, {3, 4}, {0, 5}}}),
               InputError);                                                        // overlap
  EXPECT_THROW(OmissionPlan::from_plans(22, {{2, {2, 30}, {0, 1}}}), InputError);  // out of range
}

}  // namespace
}  // namespace kvshift::cost_model
