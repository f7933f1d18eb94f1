// load_mapper() on the PyTorch-made fixture (tests/fixtures/mapper_parity, made by
// tools/make_mapper_parity_fixture.py): the C++ forward must reproduce PyTorch's Ŷ,
// so a mapper trained by tools/train_mapper.py means the same thing here. Also the
// loader's answers to bad files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/proxy_mapper.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

namespace fs = std::filesystem;

const std::string kFixture = std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/mapper_parity";

Matrix fixture_tensor(const std::string& file, const std::string& name, std::int64_t rows,
                      std::int64_t cols) {
  return SafetensorsFile::open(kFixture + "/" + file).read(name, {rows, cols});
}

// Criterion: max|a − b| / max(1e-6, max|b|) ≤ 1e-5, b = PyTorch's float64 forward of
// the float32 weights. One norm for the whole output, not per element: scores near
// zero carry the same absolute error as the large ones, and only ranking matters.
double relative_error(const Matrix& a, const Matrix& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1e-6f, b.cwiseAbs().maxCoeff());
}

void expect_matches(const Matrix& got, const Matrix& want, const char* what) {
  ASSERT_EQ(got.rows(), want.rows());
  ASSERT_EQ(got.cols(), want.cols());
  ASSERT_GT(want.cwiseAbs().maxCoeff(), 0.1f);
  const double err = relative_error(got, want);
  std::cout << what << ": max relative error vs PyTorch " << err << "\n";
  if (err > 1e-5) {
    for (Eigen::Index i = 0, shown = 0; i < got.size() && shown < 5; ++i) {
      if (std::abs(got.data()[i] - want.data()[i]) > 1e-5f * want.cwiseAbs().maxCoeff()) {
        ADD_FAILURE() << what << " (" << i / got.cols() << ", " << i % got.cols()
                      << "): " << got.data()[i] << " vs " << want.data()[i];
        ++shown;
      }
    }
  }
  EXPECT_LE(err, 1e-5);
}

TEST(MapperParity, CppForwardReproducesPyTorch) {
  const HybridAxialMapper m = load_mapper(kFixture + "/mapper.safetensors");
  const MapperConfig& c = m.config();
  EXPECT_EQ(c.in_channels, 6);
  EXPECT_EQ(c.targets, 5);
  EXPECT_EQ(c.width, 16);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.window, 8);
  const Matrix x = fixture_tensor("input.safetensors", "features", 6, 40);
  const Matrix want = fixture_tensor("expected.safetensors", "scores", 5, 40);
  expect_matches(m.forward(x), want, "forward");
  expect_matches(m.forward_direct(x), want, "forward_direct");
}

TEST(MapperParity, AFolderLoadsLikeItsSafetensorsFile) {
  const Matrix x = fixture_tensor("input.safetensors", "features", 6, 40);
  EXPECT_EQ(load_mapper(kFixture).forward(x),
            load_mapper(kFixture + "/mapper.safetensors").forward(x));
}

// A copy of the fixture whose mapper.json the test may spoil.
class MapperLoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvshift_mapper_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kFixture + "/mapper.safetensors", dir_ / "mapper.safetensors");
    std::ifstream in(kFixture + "/mapper.json");
    meta_ = nlohmann::json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_json(const std::string& text) { std::ofstream(dir_ / "mapper.json") << text; }
  // The InputError message of loading the copy (with meta_ written unless `raw`).
  std::string error(bool write = true) {
    if (write) write_json(meta_.dump());
    try {
      load_mapper((dir_ / "mapper.safetensors").string());
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an InputError";
    return "";
  }

  fs::path dir_;
  nlohmann::json meta_;
};

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST_F(MapperLoaderErrors, AMissingFileIsNamed) {
  try {
    load_mapper((dir_ / "nothing.safetensors").string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_HAS(e.what(), "nothing.safetensors: mapper file not found");
  }
}

TEST_F(MapperLoaderErrors, AMissingJsonIsNamed) {
  EXPECT_HAS(error(false), "mapper.json: not found");
}

TEST_F(MapperLoaderErrors, BadJsonIsNamed) {
  write_json("{\"architecture\": ");
  EXPECT_HAS(error(false), "mapper.json: not a JSON object");
}

TEST_F(MapperLoaderErrors, AnotherFormatIsRefused) {
  meta_["format"] = "kvshift-proxykv-dataset";
  EXPECT_HAS(error(), "/format, /version: must be \"kvshift-proxykv-mapper\", 1");
}

TEST_F(MapperLoaderErrors, MissingAndIllTypedFieldsAreAllNamed) {
  meta_["architecture"].erase("width");
  meta_["architecture"]["heads"] = "2";
  const std::string e = error();
  EXPECT_HAS(e, "mapper.json: /architecture/width: missing");
  EXPECT_HAS(e, "/architecture/heads: must be an integer ≥ 1 (got \"2\")");
}

TEST_F(MapperLoaderErrors, TheFeatureKindComesFromTheDatasetAndAnUnknownOneIsRefused) {
  meta_["dataset"]["features"] = "log_repeat_max_attention";
  write_json(meta_.dump());
  EXPECT_EQ(load_mapper((dir_ / "mapper.safetensors").string()).config().features,
            MapperFeatures::kLogRepeatMax);
  meta_["dataset"].erase("features");  // files from before the choice: the prefill's mean
  write_json(meta_.dump());
  EXPECT_EQ(load_mapper((dir_ / "mapper.safetensors").string()).config().features,
            MapperFeatures::kLogMeanAttention);
  meta_["dataset"]["features"] = "attention_mass";
  EXPECT_HAS(error(), "mapper.json: /dataset/features: must be \"log_mean_attention\" or");
}

TEST_F(MapperLoaderErrors, AnEvenKernelIsRefused) {
  meta_["architecture"]["kernel"] = 4;
  EXPECT_HAS(error(), "/architecture/kernel: must be odd (got 4)");
}

TEST_F(MapperLoaderErrors, AMisshapenTensorIsNamedWithBothShapes) {
  meta_["architecture"]["ffn"] = 24;
  EXPECT_HAS(error(),
             "mapper.safetensors: tensor \"encoder.0.ffn.up.weight\": expected shape [24, 16], "
             "found [32, 16]");
}

TEST_F(MapperLoaderErrors, AMissingTensorIsNamed) {
  meta_["architecture"]["layers"] = 3;
  EXPECT_HAS(error(), "tensor \"encoder.2.norm1.weight\" is missing");
}

TEST(MapperFits, AMismatchSaysBothSizesAndWhatTheyCount) {
  const MapperConfig c{.in_channels = 72, .targets = 90};
  EXPECT_NO_THROW(check_mapper_fits(c, 72, 90, "m"));
  try {
    check_mapper_fits(c, 240, 90, "mapper.safetensors");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "mapper.safetensors: built for 72 proxy channels × 90 targets, this proxy/target "
                 "pair has 240 × 90 (proxy layers·heads × target layers·KV heads)");
  }
}

}  // namespace
}  // namespace kvshift::backend
