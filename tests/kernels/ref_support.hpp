// Reference-test support: a float tensor from literal values, and an element-wise
// comparison with hand-computed ones.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>

#include "host_tensor.hpp"

namespace kvshift::kernels::testing {

inline HostTensor filled(std::initializer_list<std::int64_t> shape,
                         std::initializer_list<float> values) {
  HostTensor t(DType::kF32, shape);
  std::int64_t i = 0;
  for (float v : values) t.set(i++, v);
  return t;
}

inline void expect_values(const HostTensor& got, std::initializer_list<double> want,
                          double tol = 1e-6) {
  ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size()));
  std::int64_t i = 0;
  for (double w : want) {
    EXPECT_NEAR(got.get(i), w, tol) << "element " << i;
    ++i;
  }
}

}  // namespace kvshift::kernels::testing
