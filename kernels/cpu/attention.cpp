// CPU causal GQA attention, the attention-mass reduction (sum or max over
// queries) and the mapper's non-causal sliding-window attention. attention and
// attention_mass are what a forward pass runs: each head's queries go in chunks
// of 128 rows through Eigen GEMMs against the keys they see. attention_naive
// materialises one query's softmax row in double and is their oracle.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// One head of a [tokens, heads, head_dim] fp32 view: a [tokens, head_dim] strided matrix.
using HeadMatrix = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

constexpr std::int64_t kQueryChunk = 128;
constexpr double kParallelWork = 4e6;  // ~ q·k multiply-adds below which one thread is faster

float effective_scale(float scale, std::int64_t head_dim) {
  return scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

/// scale * q[i, h] . k[j, kh]
float score(const TensorView& q, const TensorView& k, std::int64_t i, std::int64_t h,
            std::int64_t j, std::int64_t kh, float scale) {
  float dot = 0;
  for (std::int64_t e = 0; e < q.shape[2]; ++e) {
    dot += load_float(q, q.offset({i, h, e})) * load_float(k, k.offset({j, kh, e}));
  }
  return dot * scale;
}

/// A view the chunked ops read and write directly (fp32 with unit innermost stride), or a
/// contiguous fp32 copy of it (exact for bf16/f16) that `store` writes back, rounded.
class F32 {
 public:
  explicit F32(const TensorView& v, bool load = true) : original_(v), view_(v) {
    if (v.empty() || (v.dtype == DType::kF32 && v.stride[v.rank - 1] == 1)) return;
    copy_.resize(static_cast<std::size_t>(v.numel()));
    view_.data = copy_.data();
    view_.dtype = DType::kF32;
    std::int64_t stride = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      view_.stride[i] = stride;
      stride *= v.shape[i];
    }
    if (!load) return;  // an output: written whole by the op, then stored
    for_each([&](std::int64_t src, std::int64_t dst) { copy_[dst] = load_float(original_, src); });
  }
  const TensorView& view() const { return view_; }
  /// Writes a copy back into the original view (nothing to do for a direct view).
  void store() const {
    if (copy_.empty()) return;
    for_each([&](std::int64_t src, std::int64_t dst) { store_float(original_, src, copy_[dst]); });
  }
  /// Head h of a rank-3 view as a [tokens, head_dim] matrix.
  HeadMatrix head(std::int64_t h) const {
    return {static_cast<float*>(view_.data) + h * view_.stride[1], view_.shape[0], view_.shape[2],
            Eigen::OuterStride<>(view_.stride[0])};
  }
  /// Row r of a rank-2 view.
  float* row(std::int64_t r) const { return static_cast<float*>(view_.data) + r * view_.stride[0]; }

 private:
  /// fn(offset in the original, offset in the copy) for every element (rank 2 or 3).
  template <typename Fn>
  void for_each(Fn fn) const {
    const auto& sh = original_.shape;
    const std::int64_t d2 = original_.rank == 3 ? sh[2] : 1;
    std::int64_t dst = 0;
    for (std::int64_t a = 0; a < sh[0]; ++a) {
      for (std::int64_t b = 0; b < sh[1]; ++b) {
        for (std::int64_t c = 0; c < d2; ++c, ++dst) {
          fn(original_.rank == 3 ? original_.offset({a, b, c}) : original_.offset({a, b}), dst);
        }
      }
    }
  }

  TensorView original_, view_;
  std::vector<float> copy_;
};

/// Scores of queries [c0, c0 + rows) of a head against the keys they see (the first
/// `keys`), scaled: s [rows, keys].
void chunk_scores(const F32& q, const F32& k, std::int64_t h, std::int64_t kh, std::int64_t c0,
                  std::int64_t rows, std::int64_t keys, float scale, RowMatrix& s) {
  const HeadMatrix qh = q.head(h), kh_all = k.head(kh);
  s.noalias() = qh.middleRows(c0, rows) * kh_all.topRows(keys).transpose();
  s *= scale;
}

/// Whether key j counts for KV head kh (no mask: every key does).
bool key_kept(const TensorView& mask, std::int64_t j, std::int64_t kh) {
  return mask.empty() || static_cast<const std::int32_t*>(mask.data)[mask.offset({j, kh})] != 0;
}

/// Sets the scores of the first `keys` columns that `mask` drops for KV head kh to −inf.
void drop_masked(const TensorView& mask, std::int64_t kh, std::int64_t keys, RowMatrix& s) {
  if (mask.empty()) return;
  for (std::int64_t j = 0; j < keys; ++j) {
    if (!key_kept(mask, j, kh)) s.col(j).setConstant(-std::numeric_limits<float>::infinity());
  }
}

/// With a sliding window: sets the scores of the keys query row i no longer sees (those before
/// first_visible + i + 1 − window) to −inf.
void drop_outside_window(std::int64_t window, std::int64_t first_visible, RowMatrix& s) {
  if (window <= 0) return;
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const Eigen::Index gone =
        std::min<Eigen::Index>(s.cols(), std::max<Eigen::Index>(0, first_visible + i + 1 - window));
    s.row(i).head(gone).setConstant(-std::numeric_limits<float>::infinity());
  }
}

/// Softmax of each row of s, query row i seeing the first first_visible + i + 1 keys (the
/// rest set to 0); lse[i] = log Σ exp of row i's visible scores. A row whose visible scores
/// are all −inf (masked) becomes 0 with lse −inf.
void masked_softmax(RowMatrix& s, std::int64_t first_visible, float* lse, std::int64_t lse_stride) {
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const Eigen::Index visible = first_visible + i + 1;
    auto row = s.row(i);
    const float m = row.head(visible).maxCoeff();
    if (m == -std::numeric_limits<float>::infinity()) {
      row.setZero();
      if (lse) lse[i * lse_stride] = m;
      continue;
    }
    row.head(visible) = (row.head(visible).array() - m).exp();
    const float sum = row.head(visible).sum();
    row.head(visible) /= sum;
    if (visible < s.cols()) row.tail(s.cols() - visible).setZero();
    if (lse) lse[i * lse_stride] = m + std::log(sum);
  }
}

/// Whether splitting heads across threads pays for a problem of this size.
bool worth_threads(const TensorView& q, const TensorView& k) {
  const double work = double(q.shape[0]) * double(k.shape[0]) * double(q.shape[1] * q.shape[2]);
  return work > kParallelWork && threads() > 1;
}

}  // namespace

void attention(const AttentionDesc& d) {
  validate(d);
  require_device("attention", Device::kHost, {&d.q, &d.k, &d.v, &d.out, &d.lse, &d.key_mask});
  apply_threads();
  const F32 q(d.q), k(d.k), v(d.v), out(d.out, false), lse(d.lse, false);
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, d.q.shape[2]);
  const bool parallel = worth_threads(d.q, d.k);
#pragma omp parallel for schedule(dynamic, 1) if (parallel) num_threads(threads())
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    RowMatrix s;
    for (std::int64_t c0 = 0; c0 < tq; c0 += kQueryChunk) {
      const std::int64_t rows = std::min(kQueryChunk, tq - c0), keys = offset + c0 + rows;
      chunk_scores(q, k, h, kh, c0, rows, keys, scale, s);
      drop_masked(d.key_mask, kh, keys, s);
      drop_outside_window(d.window, offset + c0, s);
      float* lse_at = d.lse.empty() ? nullptr : lse.row(c0) + h * lse.view().stride[1];
      masked_softmax(s, offset + c0, lse_at, lse.view().stride[0]);
      out.head(h).middleRows(c0, rows).noalias() = s * v.head(kh).topRows(keys);
    }
  }
  out.store();
  lse.store();
}

void attention_naive(const AttentionDesc& d) {
  validate(d);
  require_device("attention_naive", Device::kHost, {&d.q, &d.k, &d.v, &d.out, &d.lse, &d.key_mask});
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1], hd = d.q.shape[2];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, hd);
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      const std::int64_t visible = offset + i + 1;
      const std::int64_t first = d.window > 0 ? std::max<std::int64_t>(0, visible - d.window) : 0;
      std::vector<double> p(visible);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < visible; ++j) {
        p[j] = j >= first && key_kept(d.key_mask, j, kh) ? score(d.q, d.k, i, h, j, kh, scale)
                                                         : -std::numeric_limits<double>::infinity();
        m = std::max(m, p[j]);
      }
      double sum = 0;
      if (m > -std::numeric_limits<double>::infinity()) {
        for (double& x : p) sum += (x = std::exp(x - m));
      }
      for (std::int64_t e = 0; e < hd; ++e) {
        double o = 0;
        for (std::int64_t j = 0; j < visible && sum > 0; ++j)
          o += p[j] * load_float(d.v, d.v.offset({j, kh, e}));
        store_float(d.out, d.out.offset({i, h, e}), static_cast<float>(sum > 0 ? o / sum : 0.0));
      }
      if (!d.lse.empty())
        store_float(d.lse, d.lse.offset({i, h}), static_cast<float>(m + std::log(sum)));
    }
  }
}

void attention_mass(const AttentionMassDesc& d) {
  validate(d);
  require_device("attention_mass", Device::kHost, {&d.q, &d.k, &d.lse, &d.out});
  apply_threads();
  const F32 q(d.q), k(d.k), lse(d.lse), out(d.out, false);
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, d.q.shape[2]);
  const bool parallel = worth_threads(d.q, d.k);
#pragma omp parallel for schedule(dynamic, 1) if (parallel) num_threads(threads())
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    Eigen::ArrayXd mass = Eigen::ArrayXd::Zero(tk);
    RowMatrix s;
    for (std::int64_t c0 = d.query_begin; c0 < tq; c0 += kQueryChunk) {
      const std::int64_t rows = std::min(kQueryChunk, tq - c0), keys = offset + c0 + rows;
      chunk_scores(q, k, h, kh, c0, rows, keys, scale, s);
      drop_outside_window(d.window, offset + c0, s);
      for (Eigen::Index i = 0; i < rows; ++i) {  // weight exp(s − lse) of each visible key
        const Eigen::Index visible = offset + c0 + i + 1;
        const float row_lse = lse.row(c0 + i)[h * lse.view().stride[1]];
        s.row(i).head(visible) = (s.row(i).head(visible).array() - row_lse).exp();
        s.row(i).tail(keys - visible).setZero();
      }
      if (d.reduce == Reduce::kSum) {
        mass.head(keys) += s.colwise().sum().transpose().cast<double>().array();
      } else {
        mass.head(keys) =
            mass.head(keys).max(s.colwise().maxCoeff().transpose().cast<double>().array());
      }
    }
    float* row = out.row(h);
    for (std::int64_t j = 0; j < tk; ++j)
      row[j * out.view().stride[1]] = static_cast<float>(mass[j]);
  }
  out.store();
}

}  // namespace kvshift::kernels::cpu

namespace kvshift::kernels::cpu {

void window_attention(const WindowAttentionDesc& d) {
  validate(d);
  require_device("window_attention", Device::kHost, {&d.q, &d.k, &d.v, &d.out});
  const std::int64_t tokens = d.q.shape[0], heads = d.q.shape[1], hd = d.q.shape[2];
  const float scale = effective_scale(d.scale, hd);
  std::vector<double> p;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t lo = std::max<std::int64_t>(0, t - d.radius);
    const std::int64_t hi = std::min(tokens - 1, t + d.radius);
    for (std::int64_t h = 0; h < heads; ++h) {
      p.assign(hi - lo + 1, 0.0);
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (std::int64_t j = lo; j <= hi; ++j) {
        p[j - lo] = score(d.q, d.k, t, h, j, h, scale);
        m = std::max(m, p[j - lo]);
      }
      for (double& x : p) sum += (x = std::exp(x - m));
      for (std::int64_t e = 0; e < hd; ++e) {
        double o = 0;
        for (std::int64_t j = lo; j <= hi; ++j)
          o += p[j - lo] * load_float(d.v, d.v.offset({j, h, e}));
        store_float(d.out, d.out.offset({t, h, e}), static_cast<float>(o / sum));
      }
    }
  }
}

}  // namespace kvshift::kernels::cpu
