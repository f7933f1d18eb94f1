// Tensor views and the host bf16/fp16 conversions, with hand-checked bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/ops.hpp"
#include "kernels/tensor.hpp"

namespace kvshift::kernels {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);      // halfway, even stays
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);  // halfway, odd rounds up
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(0x3F81), 1.0078125f);
}

TEST(F16, EncodesNormalsSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(-0.5f), 0xB800);
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  for (float v : {0.1f, -3.75f, 1e-6f, 1234.5f}) {
    EXPECT_EQ(float_to_f16(f16_to_float(float_to_f16(v))), float_to_f16(v));
  }
}

TEST(TensorView, ContiguousViewsAndSlices) {
  float data[24];
  const TensorView v = make_view(data, DType::kF32, Device::kHost, {2, 3, 4});
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.contiguous());
  EXPECT_EQ(v.offset({1, 2, 3}), 23);
  const TensorView s = slice(v, 2, 1, 2);
  EXPECT_EQ(s.shape[2], 2);
  EXPECT_FALSE(s.contiguous());
  EXPECT_EQ(static_cast<float*>(s.data), data + 1);
  EXPECT_THROW(slice(v, 1, 2, 2), std::invalid_argument);
  EXPECT_EQ(v.describe(), "f32[2, 3, 4] host");
}

TEST(Validate, NamesTheOpAndTheField) {
  float x[6], w[2], out[6];
  RmsNormDesc d{make_view(x, DType::kF32, Device::kHost, {2, 3}),
                make_view(w, DType::kF32, Device::kHost, {2}),
                make_view(out, DType::kF32, Device::kHost, {2, 3})};
  try {
    validate(d);
    FAIL() << "expected a validation error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "rms_norm: weight.shape[0] must be 3 (got 2)");
  }
}

}  // namespace
}  // namespace kvshift::kernels
