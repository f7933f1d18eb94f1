// proxy_kv.quality: a scenario charges ProxyKV the ΔNLL `kvshift quality` measured, at its ρ,
// interpolated between the measured ratios, says where the number came from, and refuses a ρ
// outside them, a file without ProxyKV rows, and a hand-written number beside a measured one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

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

}  // namespace
}  // namespace kvshift::input
