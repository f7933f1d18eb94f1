// Sweep axes: --set parsing, JSON pointers with '*', the cartesian product.
#include "sweep/sweep_axes.hpp"

#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"

namespace kvshift::sweep {
namespace {

using nlohmann::json;

TEST(SweepAxes, ParsesValuesAsJsonWhenTheyAreJsonElseAsStrings) {
  const Axis a = parse_axis("/cluster/star/bandwidth=10Mbps,4,0.5,true");
  EXPECT_EQ(a.pointer, "/cluster/star/bandwidth");
  ASSERT_EQ(a.values.size(), 4u);
  EXPECT_EQ(a.values[0], json("10Mbps"));
  EXPECT_EQ(a.values[1], json(4));
  EXPECT_EQ(a.values[2], json(0.5));
  EXPECT_EQ(a.values[3], json(true));
  EXPECT_EQ(a.labels[0], "10Mbps");
}

TEST(SweepAxes, MalformedSetsAreInputErrors) {
  EXPECT_THROW(parse_axis("cluster=1"), InputError);
  EXPECT_THROW(parse_axis("/cluster/star/bandwidth"), InputError);
  EXPECT_THROW(parse_axis("/a=1,,2"), InputError);
}

TEST(SweepAxes, StarSetsEveryArrayElement) {
  json doc =
      json::parse(R"({"cluster":{"links":[{"bandwidth":"1Gbps"},{"bandwidth":"2Gbps"},{"x":1}]}})");
  EXPECT_EQ(apply_pointer(doc, "/cluster/links/*/bandwidth", "5Gbps"), 3u);
  for (const auto& l : doc["cluster"]["links"]) EXPECT_EQ(l["bandwidth"], "5Gbps");
}

TEST(SweepAxes, IndicesAndEscapesAddressOneElement) {
  json doc = json::parse(R"({"a/b":[1,2,3],"m~n":0})");
  EXPECT_EQ(apply_pointer(doc, "/a~1b/1", 9), 1u);
  EXPECT_EQ(apply_pointer(doc, "/m~0n", 7), 1u);
  EXPECT_EQ(doc["a/b"], json({1, 9, 3}));
  EXPECT_EQ(doc["m~n"], 7);
}

TEST(SweepAxes, APointerThatMatchesNothingIsAnInputErrorNamingIt) {
  json doc = json::parse(R"({"cluster":{"links":[]},"x":{"y":1}})");
  try {
    apply_pointer(doc, "/cluster/lnks/*/bandwidth", "1Gbps");
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/cluster/lnks/*/bandwidth: matches nothing"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("/cluster/lnks"), std::string::npos);
  }
  EXPECT_THROW(apply_pointer(doc, "/cluster/links/*/bandwidth", "1Gbps"),
               InputError);                                             // empty array
  EXPECT_THROW(apply_pointer(doc, "/x/y/z", 1), InputError);            // through a number
  EXPECT_THROW(apply_pointer(doc, "/cluster/links/3", 1), InputError);  // out of range
}

TEST(SweepAxes, CartesianProductRunsTheLastAxisFastest) {
  const std::vector<Axis> axes = {parse_axis("/a=1,2"), parse_axis("/b=x,y,z")};
  ASSERT_EQ(point_count(axes), 6u);
  EXPECT_EQ(point_indices(axes, 0), (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(point_indices(axes, 2), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(point_indices(axes, 4), (std::vector<std::size_t>{1, 1}));
  const json doc = point_document(json::parse(R"({"a":0,"b":""})"), axes, 5);
  EXPECT_EQ(doc, json::parse(R"({"a":2,"b":"z"})"));
}

}  // namespace
}  // namespace kvshift::sweep

namespace kvshift::sweep {
namespace {

TEST(SweepAxes, CommasInsideJsonValuesDoNotSplitThem) {
  const Axis a = parse_axis(R"(/policies/strategies=["full_kv","risk_kv"],["adaptive"],"a,b")");
  ASSERT_EQ(a.values.size(), 3u);
  EXPECT_EQ(a.values[0], nlohmann::json({"full_kv", "risk_kv"}));
  EXPECT_EQ(a.values[1], nlohmann::json({"adaptive"}));
  EXPECT_EQ(a.values[2], nlohmann::json("a,b"));
}

}  // namespace
}  // namespace kvshift::sweep
