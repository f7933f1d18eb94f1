// proxy_kv.quality: a scenario charges ProxyKV the ΔNLL `kvshift quality` measured, at its ρ,
// interpolated between the measured ratios, says where the number came from, and refuses a ρ
// outside them, a file without ProxyKV rows, and a hand-written number beside a measured one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "cost_model/move_plan.hpp"
#include "tests/input/scenario_test_util.hpp"

namespace kvshift::input {
namespace {

using testing::json;
using testing::minimal_json;
using testing::problems;

/// A quality.json with ProxyKV at ρ 0.3 and 0.5 (and a SnapKV row that must not be read).
std::string write_quality(const std::string& tag, const json& rows) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvshift-quality-" + tag + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << json{
      {"format", "kvshift-quality"},
      {"requests", 32},
      {"rows", rows}}.dump();
  return path.string();
}

json measured_rows() {
  return json::array({{{"method", "snapkv"}, {"retention", 0.4}, {"delta_nll_mean", 9.0}},
                      {{"method", "proxykv"}, {"retention", 0.5}, {"delta_nll_mean", 0.10}},
                      {{"method", "proxykv"}, {"retention", 0.3}, {"delta_nll_mean", 0.30}}});
}

json with_proxy(const json& proxy) {
  json j = minimal_json();
  j["model"] = "qwen2.5-1.5b";  // the proxy must be smaller
  j["policies"] = {{"strategies", {"full_kv", "proxy_kv"}}};
  j["proxy_kv"] = proxy;
  return j;
}

TEST(ProxyQuality, ChargesTheMeasuredDeltaAtItsRatio) {
  const std::string q = write_quality("ok", measured_rows());
  const auto at = [&](double rho) {
    return testing::load(
               with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", rho}, {"quality", q}}))
        .proxy_kv;
  };
  EXPECT_DOUBLE_EQ(at(0.5)->delta_nll, 0.10);
  EXPECT_DOUBLE_EQ(at(0.4)->delta_nll, 0.20);
  EXPECT_NE(at(0.4)->delta_nll_source.find("proxykv interpolated between ρ 0.3 and 0.5 (mean over "
                                           "32 requests, per-head budget)"),
            std::string::npos)
      << at(0.4)->delta_nll_source;
  EXPECT_NE(at(0.3)->delta_nll_source.find("measured at ρ 0.3"), std::string::npos);
  std::filesystem::remove(q);
}

TEST(ProxyQuality, HandWrittenNumbersSaySo) {
  const auto s = testing::load(
      with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"delta_nll", 0.05}}));
  EXPECT_EQ(s.proxy_kv->delta_nll_source,
            "scenario constant, not measured (proxy_kv.delta_nll written by hand)");
  EXPECT_FALSE(s.proxy_kv->over_eps_share);  // unknown, not 0
}

TEST(ProxyQuality, RefusesWhatItCannotMeasure) {
  const std::string q = write_quality("bad", measured_rows());
  using V = std::vector<std::string>;
  const V outside =
      problems(with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.7}, {"quality", q}}));
  ASSERT_EQ(outside.size(), 1u);
  EXPECT_NE(outside[0].find("/proxy_kv/retention: 0.7 is outside the ratios"), std::string::npos)
      << outside[0];
  EXPECT_NE(outside[0].find("[0.3, 0.5]"), std::string::npos) << outside[0];
  const V both = problems(with_proxy(
      {{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", q}, {"delta_nll", 0.1}}));
  ASSERT_EQ(both.size(), 1u);
  EXPECT_NE(both[0].find("/proxy_kv/quality: give either"), std::string::npos) << both[0];
  const V neither = problems(with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}}));
  ASSERT_EQ(neither.size(), 1u);
  EXPECT_NE(neither[0].find("/proxy_kv/delta_nll: is required"), std::string::npos) << neither[0];
  const std::string no_proxy = write_quality("none", json::array({measured_rows()[0]}));
  const V none = problems(
      with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", no_proxy}}));
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none[0].find("holds no proxykv rows"), std::string::npos) << none[0];
  json two = measured_rows();  // a second mapper in the same run: which one is meant?
  two.push_back({{"method", "proxykv"},
                 {"label", "proxykv-2"},
                 {"retention", 0.5},
                 {"delta_nll_mean", 0.05}});
  const std::string two_mappers = write_quality("two", two);
  const V ambiguous = problems(
      with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", two_mappers}}));
  ASSERT_EQ(ambiguous.size(), 1u);
  EXPECT_NE(ambiguous[0].find("holds 2 ProxyKV mappers (proxykv, proxykv-2)"), std::string::npos)
      << ambiguous[0];
  std::filesystem::remove(two_mappers);
  const V missing = problems(with_proxy(
      {{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", "/nonexistent/q.json"}}));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("/proxy_kv/quality: "), std::string::npos) << missing[0];
  std::filesystem::remove(q);
  std::filesystem::remove(no_proxy);
}

/// A quality.json run at `history` tokens with ProxyKV at ρ 0.3 and 0.5.
std::string write_quality_at(std::int64_t history, double at_half) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("kvshift-quality-h" + std::to_string(history) + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path)
      << json{{"format", "kvshift-quality"},
              {"requests", 32},
              {"history", history},
              {"rows",
               json::array(
                   {{{"method", "proxykv"}, {"retention", 0.5}, {"delta_nll_mean", at_half}},
                    {{"method", "proxykv"}, {"retention", 0.3}, {"delta_nll_mean", 1.0}}})}}
             .dump();
  return path.string();
}

// Files measured at several histories: each move pays the ΔNLL of its own context, linear
// between the measured ones and the nearest outside them, and the source says so.
TEST(ProxyQuality, FilesAtSeveralHistoriesChargeEachMoveAtItsContext) {
  const std::string h512 = write_quality_at(512, 0.10), h2048 = write_quality_at(2048, 0.40);
  const ScenarioSpec spec = testing::load(with_proxy(
      {{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", {h2048, h512}}}));
  ASSERT_TRUE(spec.proxy_kv);
  ASSERT_EQ(spec.proxy_kv->delta_nll_by_context.size(), 2u);
  EXPECT_NE(spec.proxy_kv->delta_nll_source.find("measured at 512, 2048 history tokens; each "
                                                 "move is charged at its own context"),
            std::string::npos)
      << spec.proxy_kv->delta_nll_source;
  const cost_model::MoveMethods methods =
      sim::move_methods(spec, spec.model, spec.risk_kv, spec.proxy_kv);
  auto charged = [&](std::int64_t context) {
    return cost_model::plan_move(cost_model::Strategy::kProxyKv, methods,
                                 {context, context, cost_model::SourceKv::kFull, true, false})
        .delta_nll;
  };
  EXPECT_DOUBLE_EQ(charged(512), 0.10);
  EXPECT_DOUBLE_EQ(charged(1280), 0.25);
  EXPECT_DOUBLE_EQ(charged(2048), 0.40);
  EXPECT_DOUBLE_EQ(charged(100), 0.10) << "the nearest measured below";
  EXPECT_DOUBLE_EQ(charged(9000), 0.40) << "the nearest measured above";
  // A list needs two files, each saying its history, no two at the same one.
  using V = std::vector<std::string>;
  const V one = problems(
      with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", {h512}}}));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NE(one[0].find("/proxy_kv/quality: expected a quality.json, or a list of two"),
            std::string::npos)
      << one[0];
  const V twice = problems(
      with_proxy({{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", {h512, h512}}}));
  ASSERT_EQ(twice.size(), 1u);
  EXPECT_NE(twice[0].find("/proxy_kv/quality/1: two files measured at 512 history tokens"),
            std::string::npos)
      << twice[0];
  const std::string undated = write_quality("undated", measured_rows());
  const V no_history = problems(with_proxy(
      {{"proxy_model", "qwen2.5-0.5b"}, {"retention", 0.5}, {"quality", {h512, undated}}}));
  ASSERT_EQ(no_history.size(), 1u);
  EXPECT_NE(no_history[0].find("/proxy_kv/quality/1: the file does not say which history"),
            std::string::npos)
      << no_history[0];
  for (const auto& f : {h512, h2048, undated}) std::filesystem::remove(f);
}

}  // namespace
}  // namespace kvshift::input
