// Chunked causal GQA attention; see attention.hpp.
#include "backend/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace kvshift::backend {
namespace {

constexpr Eigen::Index kQueryChunk = 128;
constexpr double kParallelWork = 4e6;  // ~ q·k multiply-adds below which one thread is faster

/// Softmax of each row of s[:, 0..keys) with the causal mask of rows starting at `pos0`.
void masked_softmax(Matrix& s, std::int64_t pos0) {
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const Eigen::Index visible = pos0 + i + 1;
    auto row = s.row(i);
    const float m = row.head(visible).maxCoeff();
    row.head(visible) = (row.head(visible).array() - m).exp();
    row.head(visible) /= row.head(visible).sum();
    if (visible < s.cols()) row.tail(s.cols() - visible).setZero();
  }
}

void head_attention(const Matrix& q, const Matrix& k, const Matrix& v, const AttentionDesc& d,
                    int h, Matrix& out, AttentionStats* stats, int layer) {
  const int group = d.q_heads / d.kv_heads;
  const int g = h / group;
  const Eigen::Index dh = d.head_dim, T = q.rows();
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  Matrix s;
  for (Eigen::Index c0 = 0; c0 < T; c0 += kQueryChunk) {
    const Eigen::Index rows = std::min(kQueryChunk, T - c0);
    const Eigen::Index keys = d.first_position + c0 + rows;
    s.noalias() = q.block(c0, h * dh, rows, dh) * k.block(0, g * dh, keys, dh).transpose();
    s *= scale;
    masked_softmax(s, d.first_position + c0);
    out.block(c0, h * dh, rows, dh).noalias() = s * v.block(0, g * dh, keys, dh);
    if (stats) {
      const Eigen::Index r = static_cast<Eigen::Index>(layer) * d.q_heads + h;
      stats->mass.row(r).head(keys) += s.colwise().sum();
      stats->max.row(r).head(keys) = stats->max.row(r).head(keys).cwiseMax(s.colwise().maxCoeff());
      const Eigen::Index wfirst = std::max<Eigen::Index>(T - stats->window, c0);
      if (wfirst < c0 + rows) {
        stats->window_mass.row(r).head(keys) += s.bottomRows(c0 + rows - wfirst).colwise().sum();
      }
    }
  }
}

}  // namespace

void causal_attention(const Matrix& q, const Matrix& k, const Matrix& v, const AttentionDesc& d,
                      Matrix& out, AttentionStats* stats, int layer) {
  const Eigen::Index dh = d.head_dim;
  if (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0 || q.cols() != d.q_heads * dh ||
      k.cols() != d.kv_heads * dh || v.cols() != k.cols() || k.rows() != v.rows() ||
      k.rows() != d.first_position + q.rows()) {
    throw std::invalid_argument("causal_attention: inconsistent shapes");
  }
  if (stats && (stats->mass.cols() < k.rows() || stats->mass.rows() < (layer + 1) * d.q_heads)) {
    throw std::invalid_argument("causal_attention: stats not sized for this pass");
  }
  out.resize(q.rows(), q.cols());
  // Threads only pay for themselves on real shapes; tiny ones stay on one core.
  const double work = double(q.rows()) * double(k.rows()) * double(q.cols());
  const bool parallel = work > kParallelWork && cpu_threads() > 1;
#pragma omp parallel for schedule(dynamic, 1) if (parallel) num_threads(cpu_threads())
  for (int h = 0; h < d.q_heads; ++h) head_attention(q, k, v, d, h, out, stats, layer);
}

namespace {

int threads_from_environment() {
  const char* env = std::getenv("KVSHIFT_THREADS");
  const int n = env ? std::atoi(env) : 1;
  return std::max(1, n);
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> threads{threads_from_environment()};
  return threads;
}

}  // namespace

int cpu_threads() {
#ifdef _OPENMP
  return thread_setting().load();
#else
  return 1;
#endif
}

void set_cpu_threads(int threads) {
  thread_setting().store(std::max(1, threads));
  Eigen::setNbThreads(cpu_threads());
}

void apply_cpu_threads() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::setNbThreads(cpu_threads()); });
}

}  // namespace kvshift::backend
