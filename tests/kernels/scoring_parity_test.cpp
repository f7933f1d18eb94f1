// The CPU twins of the pruning score ops against the backend functions they
// port (backend/pruning.cpp, backend/proxy_scoring.cpp, backend/attention.cpp):
// reduce_to_kv_heads, average_pool_rows, log_mean_attention, and the CPU
// model's attention statistics (max for KVZip, mass and window mass), on
// random inputs with a cached history.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "backend/attention.hpp"
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

// A pass of 11 new queries over 6 cached tokens with GQA 6:2: the twins' mass, window mass
// and max equal the statistics the CPU model's attention collects.
TEST(ScoringParity, AttentionMassAndMaxAreTheModelsStatistics) {
  const int q_heads = 6, kv_heads = 2, hd = 8, history = 6, window = 4;
  const Eigen::Index tq = 11, tk = history + tq;
  std::mt19937_64 rng(4);
  const Matrix q = random_matrix(tq, q_heads * hd, rng), k = random_matrix(tk, kv_heads * hd, rng),
               v = random_matrix(tk, kv_heads * hd, rng);
  backend::AttentionStats stats;
  stats.mass = stats.window_mass = stats.max = Matrix::Zero(q_heads, tk);
  stats.window = window;
  Matrix out;
  backend::causal_attention(q, k, v, {q_heads, kv_heads, hd, history}, out, &stats);

  const TensorView q3 =
      make_view(const_cast<float*>(q.data()), DType::kF32, Device::kHost, {tq, q_heads, hd});
  const TensorView k3 =
      make_view(const_cast<float*>(k.data()), DType::kF32, Device::kHost, {tk, kv_heads, hd});
  const TensorView v3 =
      make_view(const_cast<float*>(v.data()), DType::kF32, Device::kHost, {tk, kv_heads, hd});
  Matrix attn(tq, q_heads * hd), lse(tq, q_heads);
  const TensorView out3 = make_view(attn.data(), DType::kF32, Device::kHost, {tq, q_heads, hd});
  cpu::attention({q3, k3, v3, out3, view(lse), 0});
  EXPECT_LE(relative_error(attn, out), 1e-5);
  for (const auto& [want, begin, reduce] : {std::tuple{&stats.mass, Eigen::Index{0}, Reduce::kSum},
                                            {&stats.window_mass, tq - window, Reduce::kSum},
                                            {&stats.max, Eigen::Index{0}, Reduce::kMax}}) {
    Matrix got(q_heads, tk);
    cpu::attention_mass({q3, k3, view(lse), view(got), 0, begin, reduce});
    EXPECT_LE(relative_error(got, *want), 1e-5) << "query_begin " << begin;
  }
}

}  // namespace
}  // namespace kvshift::kernels
