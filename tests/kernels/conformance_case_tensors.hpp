// What the op cases are made of: random and blank tensors, and the cases' names. Shared by
// conformance_cases.cpp and conformance_cases_reconstruct.cpp.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "conformance_cases.hpp"

namespace kvshift::kernels::testing::case_tensors {

using Rng = std::mt19937_64;
using Tensors = std::vector<CaseTensor>;
using Views = std::vector<TensorView>;
using Shape = std::initializer_list<std::int64_t>;
inline constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

/// An input of Normal(0, sigma) values, none zero.
inline CaseTensor random(Rng& rng, std::string name, DType t, Shape shape, float sigma = 1) {
  CaseTensor c{std::move(name), Role::kIn, HostTensor(t, shape)};
  c.host.randomize(rng, sigma);
  return c;
}

/// A zero tensor, for the run (an output) or make (indices, ids) to fill.
inline CaseTensor blank(std::string name, DType t, Shape shape, Role role = Role::kOut) {
  return {std::move(name), role, HostTensor(t, shape)};
}

inline std::string tag(DType t) { return std::string(dtype_name(t)); }

inline std::string name_of(Op op, DType t, const std::string& what = "") {
  return std::string(op_name(op)) + "_" + tag(t) + (what.empty() ? "" : "_" + what);
}

}  // namespace kvshift::kernels::testing::case_tensors

namespace kvshift::kernels::testing {
/// The reconstruction cases: anchor gathers, one group over NaN targets, two groups launched
/// and replayed from a CUDA Graph.
void add_reconstruct(std::vector<OpCase>& cases);
}  // namespace kvshift::kernels::testing
