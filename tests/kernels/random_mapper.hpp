// Test support: a mapper's weights drawn at random without the CPU backend
// (HybridAxialMapper::random lives in kvshift_backend, which the GPU-only
// build lacks), for GpuMapper and the CUDA profiler's proxy_score.
#pragma once

#include <cmath>
#include <random>

#include "backend/mapper_weights.hpp"

namespace kvshift::backend::testing {

/// Normal(mean, sigma) entries.
inline Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng, float mean,
                            float sigma) {
  std::normal_distribution<float> d(mean, sigma);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

/// Random weights shaped like HybridAxialMapper::random's (norm weights near 1).
inline MapperWeights random_mapper_weights(const MapperConfig& c, std::mt19937_64& rng) {
  const auto mat = [&](Eigen::Index r, Eigen::Index k) {
    return random_matrix(r, k, rng, 0, 1 / std::sqrt(float(k)));
  };
  const auto row = [&](Eigen::Index n) -> RowVector { return mat(1, n).row(0); };
  const auto norm = [&](Eigen::Index n) -> Vector {
    return random_matrix(n, 1, rng, 1, 0.1f).col(0);
  };
  MapperWeights w;
  w.config = c;
  const int W = c.width;
  w.stem_w = mat(W, c.in_channels * c.kernel);
  w.stem_b = row(W);
  for (int l = 0; l < c.layers; ++l) {
    w.encoder.push_back({norm(W), norm(W) - Vector::Ones(W), norm(W), norm(W) - Vector::Ones(W),
                         mat(W, W), mat(W, W), mat(W, W), mat(W, W), mat(c.ffn, W), mat(W, c.ffn),
                         row(W), row(W), row(W), row(W), row(c.ffn), row(W)});
  }
  w.norm_w = norm(W);
  w.norm_b = norm(W) - Vector::Ones(W);
  w.target_queries = mat(c.targets, W);
  w.source_embed = mat(c.in_channels, W);
  w.wq = mat(W, W);
  w.wk = mat(W, W);
  w.wv = mat(W, W);
  w.feature_proj = row(W);
  w.out_w = row(W);
  w.out_b = 0.3f;
  return w;
}

}  // namespace kvshift::backend::testing
