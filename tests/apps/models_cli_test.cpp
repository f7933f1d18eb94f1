// `kvshift models`: the model list and the GPU presets, as a table or as JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

TEST(ModelsCli, GpusJsonIsJson) {
  const auto r = run_kvshift("models --gpus --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) on the text table
  ASSERT_TRUE(j.is_array());
  ASSERT_FALSE(j.empty());
  bool h100 = false;
  for (const auto& g : j) {
    EXPECT_GT(g["peak_dense_fp16_tflops"].get<double>(), 0);
    EXPECT_GT(g["hbm_capacity_gib"].get<double>(), 0);
    h100 |= g["name"] == "h100";
  }
  EXPECT_TRUE(h100);
  EXPECT_TRUE(nlohmann::json::parse(run_kvshift("models --json").out).is_array());
}

}  // namespace
}  // namespace kvshift::testing
