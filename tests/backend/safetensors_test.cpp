// Safetensors reader and HF loader on bad input: every defect is an InputError
// that names the tensor (and the expected shape), never a crash or a read
// outside the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/safetensors.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes image(const std::string& header, const Bytes& data) {
  Bytes out(8 + header.size() + data.size());
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

Bytes floats(std::initializer_list<float> v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

std::string error_of(const Bytes& bytes, const std::string& tensor = "",
                     std::vector<std::int64_t> shape = {}) {
  try {
    const auto f = SafetensorsFile::from_bytes(bytes, "t.safetensors");
    if (!tensor.empty()) f.read(tensor, shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsF32F16AndBf16) {
  Bytes data = floats({1.5f, -2.0f});
  const std::uint16_t half[2] = {0x3C00, 0xC000};  // 1.0, -2.0
  const std::uint16_t bf[2] = {0x3FC0, 0x4049};    // 1.5, 3.140625
  data.insert(data.end(), reinterpret_cast<const std::uint8_t*>(half),
              reinterpret_cast<const std::uint8_t*>(half) + 4);
  data.insert(data.end(), reinterpret_cast<const std::uint8_t*>(bf),
              reinterpret_cast<const std::uint8_t*>(bf) + 4);
  const auto f = SafetensorsFile::from_bytes(
      image(R"({"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},)"
            R"("c":{"dtype":"BF16","shape":[2,1],"data_offsets":[12,16]},"__metadata__":{}})",
            data),
      "mem");
  EXPECT_EQ(f.read("a", {1, 2}), (Matrix(1, 2) << 1.5f, -2.0f).finished());
  EXPECT_EQ(f.read_vector("b", 2), (Vector(2) << 1.0f, -2.0f).finished());
  EXPECT_EQ(f.read("c", {2, 1}), (Matrix(2, 1) << 1.5f, 3.140625f).finished());
}

TEST(Safetensors, TruncatedFilesAreRejected) {
  EXPECT_NE(error_of(Bytes{1, 2, 3}).find("too short"), std::string::npos);
  Bytes b = image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", floats({1, 2}));
  b.resize(b.size() - 1);
  const std::string e = error_of(b);
  EXPECT_NE(e.find("tensor \"a\""), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  Bytes huge_header(8, 0xFF);
  EXPECT_NE(error_of(huge_header).find("header length"), std::string::npos);
}

TEST(Safetensors, InconsistentHeadersNameTheTensor) {
  EXPECT_NE(
      error_of(image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats({1, 2})))
          .find("tensor \"w\": shape [3] of F32 needs 12 bytes"),
      std::string::npos);
  EXPECT_NE(
      error_of(image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", floats({1, 2})))
          .find("tensor \"w\""),
      std::string::npos);
  EXPECT_NE(error_of(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           floats({1, 2})))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(error_of(image(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", {0}))
                .find("unknown dtype \"Q4\""),
            std::string::npos);
  EXPECT_NE(error_of(image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", {}))
                .find("tensor \"w\""),
            std::string::npos);
  EXPECT_NE(error_of(image("not json", {})).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(image("[1,2]", {})).find("must be a JSON object"), std::string::npos);
}

TEST(Safetensors, UnsupportedDtypeAndShapeMismatchNameTensorAndExpectedShape) {
  const Bytes b = image(R"({"ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                        R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        floats({0, 0, 1, 2}));
  const std::string dtype = error_of(b, "ids", {2});
  EXPECT_NE(dtype.find("tensor \"ids\": unsupported dtype \"I32\""), std::string::npos) << dtype;
  const std::string shape = error_of(b, "w", {2, 1});
  EXPECT_NE(shape.find("tensor \"w\": expected shape [2, 1], found [2]"), std::string::npos)
      << shape;
  const std::string missing = error_of(b, "x", {4});
  EXPECT_NE(missing.find("tensor \"x\" is missing (expected shape [4])"), std::string::npos)
      << missing;
}

class BadModelFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvshift-bad-model-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_llama", dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string load_error() {
    try {
      load_hf_model(dir_.string());
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  void edit_config(const std::function<void(nlohmann::json&)>& fn) {
    std::ifstream in(dir_ / "config.json");
    auto j = nlohmann::json::parse(in);
    fn(j);
    std::ofstream(dir_ / "config.json") << j.dump();
  }
  fs::path dir_;
};

TEST_F(BadModelFolder, ConfigWeightShapeMismatchNamesTensorAndExpectedShape) {
  edit_config([](nlohmann::json& j) { j["intermediate_size"] = 48; });
  const std::string e = load_error();
  EXPECT_NE(e.find("tensor \"model.layers.0.mlp.gate_proj.weight\": expected shape [48, 32], "
                   "found [64, 32]"),
            std::string::npos)
      << e;
}

TEST_F(BadModelFolder, UnsupportedArchitectureIsRejected) {
  edit_config([](nlohmann::json& j) { j["model_type"] = "gpt2"; });
  EXPECT_NE(load_error().find("unsupported architecture \"gpt2\""), std::string::npos);
}

TEST_F(BadModelFolder, MissingLayerTensorIsNamedWithItsShape) {
  edit_config([](nlohmann::json& j) { j["num_hidden_layers"] = 3; });
  const std::string e = load_error();
  EXPECT_NE(e.find("model.layers.2.input_layernorm.weight\" is missing (expected shape [32])"),
            std::string::npos)
      << e;
}

TEST_F(BadModelFolder, TruncatedWeightsFileIsRejected) {
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 10);
  const std::string e = load_error();
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(BadModelFolder, MissingWeightsFileIsRejected) {
  fs::remove(dir_ / "model.safetensors");
  EXPECT_NE(load_error().find("no model.safetensors"), std::string::npos);
}

TEST(RandomWeights, AreDeterministicForASeed) {
  cost_model::ModelSpec m = cost_model::find_model("smollm2-135m");
  m.layers = 1;
  m.vocab = 64;
  const ModelWeights a = random_weights(m, 7), b = random_weights(m, 7), c = random_weights(m, 8);
  EXPECT_EQ(a.layers[0].wq, b.layers[0].wq);
  EXPECT_NE(a.layers[0].wq, c.layers[0].wq);
  EXPECT_EQ(a.layers[0].wk.rows(), 3 * 64);
  EXPECT_EQ(a.lm_head.size(), 0);  // SmolLM2 ties its embeddings
}

}  // namespace
}  // namespace kvshift::backend
