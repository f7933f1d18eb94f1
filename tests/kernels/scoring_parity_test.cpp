// The CPU twins of the pruning score ops against the backend functions they
// port (backend/pruning.cpp, backend/proxy_scoring.cpp): reduce_to_kv_heads,
// average_pool_rows and log_mean_attention, on random inputs.
#include <gtest/gtest.h>

#include <random>

#include "backend/proxy_scoring.hpp"
#include "backend/pruning.hpp"
#include "host_tensor.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels {
namespace {

using backend::Matrix;

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng, float sigma = 1) {
  std::normal_distribution<float> d(0, sigma);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

TensorView view(const Matrix& m) {
  return make_view(const_cast<float*>(m.data()), DType::kF32, Device::kHost, {m.rows(), m.cols()});
}

double relative_error(const Matrix& got, const Matrix& want) {
  return (got - want).norm() / want.norm();
}

TEST(ScoringParity, GroupReduceIsReduceToKvHeads) {
  std::mt19937_64 rng(1);
  const Matrix q = random_matrix(3 * 12, 57, rng);  // 3 layers x 12 query heads
  for (const auto& [how, reduce] : {std::pair{backend::GroupReduce::kSum, Reduce::kSum},
                                    {backend::GroupReduce::kMax, Reduce::kMax}}) {
    const Matrix want = backend::reduce_to_kv_heads(q, 12, 4, how);
    Matrix got(3 * 4, 57);
    cpu::group_reduce({view(q), view(got), reduce});
    EXPECT_EQ(got, want);
  }
}

TEST(ScoringParity, AvgPoolIsAveragePoolRows) {
  std::mt19937_64 rng(2);
  const Matrix x = random_matrix(7, 101, rng);
  for (const int kernel : {1, 7, 13}) {
    const Matrix want = backend::average_pool_rows(x, kernel);
    Matrix got(7, 101);
    cpu::avg_pool({view(x), view(got), kernel});
    EXPECT_LE(relative_error(got, want), 1e-6) << "kernel " << kernel;
  }
}

TEST(ScoringParity, LogMeanAttentionIsTheBackendTransform) {
  EXPECT_EQ(LogMeanAttentionDesc{}.eps, backend::kLogMeanAttentionEps);
  std::mt19937_64 rng(3);
  Matrix mass = random_matrix(9, 64, rng).cwiseAbs() * 5;
  mass(2, 5) = 0;
  const Matrix want = backend::log_mean_attention(mass);
  Matrix got(9, 64);
  cpu::log_mean_attention({view(mass), view(got)});
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kvshift::kernels
