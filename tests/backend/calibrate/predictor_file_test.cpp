// predictors.safetensors: what the writer writes, the reader reads back (bit for bit in fp32,
// to fp16 rounding in fp16), and a file that does not fit the model is refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "backend/calibrate/predictor_file.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/input_error.hpp"
#include "tests/backend/tiny_spec.hpp"

namespace kvshift::backend::calibrate {
namespace {

std::string write_file(const std::string& bytes, const std::string& tag) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("kvshift-predictors-" + tag + "-" + std::to_string(::getpid()) + ".safetensors");
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::vector<FittedGroup> two_groups(const cost_model::ModelSpec& spec) {
  std::vector<FittedGroup> g(2);
  g[0].group = 2;
  g[0].predictor = random_predictor(spec, {2, {2, 3}, {0, 1, 4, 5}}, 7);
  g[1].group = 3;
  g[1].predictor = random_predictor(spec, {3, {4, 5}, {2, 3, 6, 7}}, 8);
  return g;
}

std::string message_of(const std::string& path, const cost_model::ModelSpec& spec) {
  try {
    read_predictors(path, spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PredictorFile, ReadsBackWhatItWrote) {
  const auto spec = testing::tiny_spec("tiny");
  const auto groups = two_groups(spec);
  const std::string f32 =
      write_file(predictors_safetensors(groups, cost_model::DType::kF32, "tiny"), "f32");
  const auto back = read_predictors(f32, spec);
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].group, groups[i].group);
    EXPECT_EQ(back[i].predictor.anchor_layers, groups[i].predictor.anchor_layers);
    EXPECT_EQ(back[i].predictor.target_layers, groups[i].predictor.target_layers);
    EXPECT_EQ(back[i].predictor.weight, groups[i].predictor.weight);
    EXPECT_EQ(back[i].predictor.bias, groups[i].predictor.bias);
  }
  const std::string f16 =
      write_file(predictors_safetensors(groups, cost_model::DType::kF16, "tiny"), "f16");
  const auto half = read_predictors(f16, spec);
  const Matrix& w = groups[0].predictor.weight;
  EXPECT_LE((half[0].predictor.weight - w).cwiseAbs().maxCoeff(), w.cwiseAbs().maxCoeff() / 1024);
  std::filesystem::remove(f32);
  std::filesystem::remove(f16);
}

TEST(PredictorFile, CarriesTheSinkRowsAndRefusesABadCount) {
  const auto spec = testing::tiny_spec("tiny");
  auto groups = two_groups(spec);
  const std::string none =
      write_file(predictors_safetensors(groups, cost_model::DType::kF32, "tiny"), "sink0");
  for (const auto& p : read_predictors(none, spec)) EXPECT_EQ(p.predictor.sink_rows, 0);
  for (auto& g : groups) g.predictor.sink_rows = 4;
  const std::string four =
      write_file(predictors_safetensors(groups, cost_model::DType::kF32, "tiny"), "sink4");
  for (const auto& p : read_predictors(four, spec)) EXPECT_EQ(p.predictor.sink_rows, 4);
  groups[1].predictor.sink_rows = 1;  // one calibration, one count for all its groups
  EXPECT_THROW(predictors_safetensors(groups, cost_model::DType::kF32, "tiny"), std::logic_error);
  // A hand-edited count is refused by name.
  std::ifstream in(four, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string good = "\"sink_rows\":\"4\"", edited = "\"sink_rows\":\"x\"";
  const auto at = bytes.find(good);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, good.size(), edited);  // same length: the header's size still holds
  const std::string bad = write_file(bytes, "sinkx");
  EXPECT_NE(message_of(bad, spec).find("__metadata__.sink_rows is \"x\""), std::string::npos)
      << message_of(bad, spec);
  for (const auto& f : {none, four, bad}) std::filesystem::remove(f);
}

TEST(PredictorFile, RefusesAFileForAnotherModel) {
  const auto spec = testing::tiny_spec("tiny");
  const std::string path = write_file(
      predictors_safetensors(two_groups(spec), cost_model::DType::kF32, "tiny"), "other");
  auto fewer_layers = testing::tiny_spec("small", {.layers = 6});
  EXPECT_NE(message_of(path, fewer_layers).find("G3: \"2,3,6,7\" is not an ascending list"),
            std::string::npos)
      << message_of(path, fewer_layers);
  auto wider = testing::tiny_spec("wide", {.head_dim = 16});
  EXPECT_NE(message_of(path, wider).find("tensor \"G2.weight\": expected shape"), std::string::npos)
      << message_of(path, wider);
  EXPECT_NE(message_of("/nonexistent/predictors.safetensors", spec).find("cannot open"),
            std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
