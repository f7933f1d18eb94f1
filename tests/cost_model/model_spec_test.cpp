#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::cost_model {
namespace {

TEST(ModelSpec, RegistryHoldsThePublishedShapes) {
  const ModelSpec& q = find_model("qwen2.5-0.5b");
  EXPECT_EQ(q.layers, 24);
  EXPECT_EQ(q.kv_heads, 2);
  EXPECT_EQ(q.head_dim, 64);
  EXPECT_EQ(q.kv_width(), 256);
  const ModelSpec& t = find_model("TinyLlama-1.1B");  // case-insensitive
  EXPECT_EQ(t.layers, 22);
  EXPECT_EQ(t.kv_width(), 512);
  EXPECT_EQ(find_model("qwen2.5-1.5b").kv_width(), 512);
  for (const char* name : {"qwen2.5-7b", "smollm2-135m", "llama-3.1-8b"}) {
    EXPECT_NO_THROW(validate(find_model(name))) << name;
  }
}

TEST(ModelSpec, ParameterCountsMatchThePublishedSizes) {
  EXPECT_EQ(find_model("smollm2-135m").parameter_count(), 134'515'008);
  EXPECT_EQ(find_model("qwen2.5-0.5b").parameter_count(), 494'032'768);
  EXPECT_EQ(find_model("llama-3.1-8b").parameter_count(), 8'030'261'248);
  EXPECT_EQ(find_model("tinyllama-1.1b").parameter_count(), 1'100'048'384);
}

TEST(ModelSpec, UnknownModelErrorListsKnownNames) {
  try {
    find_model("gpt-5");
    FAIL();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gpt-5"), std::string::npos);
    EXPECT_NE(msg.find("qwen2.5-0.5b"), std::string::npos);
    EXPECT_NE(msg.find("smollm2-135m"), std::string::npos);
  }
}

TEST(ModelSpec, ValidationNamesTheBadField) {
  ModelSpec m = find_model("smollm2-135m");
  m.kv_heads = 4;  // 9 query heads are not a multiple of 4
  EXPECT_THROW(validate(m), InputError);
  m = find_model("smollm2-135m");
  m.layers = 0;
  try {
    validate(m);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layers"), std::string::npos);
  }
}

TEST(ModelSpec, DtypeNamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_EQ(parse_dtype(dtype_name(t), "f"), t);
  }
  EXPECT_THROW(parse_dtype("int8", "--predictor"), InputError);
}

}  // namespace
}  // namespace kvshift::cost_model
