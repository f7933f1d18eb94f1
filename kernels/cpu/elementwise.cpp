// CPU twins of the elementwise and layout kernels: RMSNorm, RoPE, SwiGLU,
// embedding, seeded fill, the fused bias+RoPE+scatter epilogue and the RISK-KV
// anchor gather. Plain loops over strided views, fp32 arithmetic throughout;
// RMSNorm and SwiGLU run each row as an Eigen array expression (in place for
// fp32 rows, on an exact fp32 copy otherwise), since every layer runs them.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// cos/sin of one position's RoPE angles, computed once and applied to every head.
class RopeAngles {
 public:
  RopeAngles(double theta, int head_dim)
      : half_(head_dim / 2), inv_freq_(half_), cs_(half_), sn_(half_) {
    for (int i = 0; i < half_; ++i) inv_freq_[i] = rope_inv_freq(theta, i, head_dim);
  }

  void at(std::int64_t position, bool inverse) {
    for (int i = 0; i < half_; ++i) {
      rope_cos_sin_of(inv_freq_[i], position, &cs_[i], &sn_[i]);
      if (inverse) sn_[i] = -sn_[i];
    }
  }

  /// Rotates one head vector; `out` may be `in`.
  void rotate(const float* in, float* out) const {
    for (int i = 0; i < half_; ++i) {
      const float a = in[i], b = in[i + half_];
      out[i] = a * cs_[i] - b * sn_[i];
      out[i + half_] = b * cs_[i] + a * sn_[i];
    }
  }

 private:
  int half_;
  std::vector<double> inv_freq_;
  std::vector<float> cs_, sn_;
};

/// Whether row r of a rank-2 view can be used in place (fp32, unit stride).
bool direct_rows(const TensorView& v) { return v.dtype == DType::kF32 && v.stride[1] == 1; }

float* row_pointer(const TensorView& v, std::int64_t r) {
  return static_cast<float*>(v.data) + r * v.stride[0];
}

/// Row r of a rank-2 view as fp32: the row itself, or its copy (exact) in `buffer`.
const float* read_row(const TensorView& v, std::int64_t r, std::vector<float>& buffer) {
  if (direct_rows(v)) return row_pointer(v, r);
  buffer.resize(static_cast<std::size_t>(v.shape[1]));
  for (std::int64_t i = 0; i < v.shape[1]; ++i) buffer[i] = load_float(v, v.offset({r, i}));
  return buffer.data();
}

/// Where row r of an output is written: the row itself, or `buffer` for write_row to store.
float* row_target(const TensorView& v, std::int64_t r, std::vector<float>& buffer) {
  if (direct_rows(v)) return row_pointer(v, r);
  buffer.resize(static_cast<std::size_t>(v.shape[1]));
  return buffer.data();
}

void write_row(const TensorView& v, std::int64_t r, const std::vector<float>& buffer) {
  if (direct_rows(v)) return;
  for (std::int64_t i = 0; i < v.shape[1]; ++i) store_float(v, v.offset({r, i}), buffer[i]);
}

}  // namespace

void rms_norm(const RmsNormDesc& d) {
  validate(d);
  require_device("rms_norm", Device::kHost, {&d.x, &d.weight, &d.out});
  const std::int64_t rows = d.x.shape[0], dim = d.x.shape[1];
  std::vector<float> weight(dim), in, out;
  for (std::int64_t i = 0; i < dim; ++i) weight[i] = load_float(d.weight, d.weight.offset({i}));
  const auto w = Eigen::Map<const Eigen::ArrayXf>(weight.data(), dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto x = Eigen::Map<const Eigen::ArrayXf>(read_row(d.x, r, in), dim);
    const double sum = x.cast<double>().square().sum();
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum / dim) + d.eps);
    if (d.accumulate) {
      Eigen::Map<Eigen::ArrayXf> o(const_cast<float*>(read_row(d.out, r, out)), dim);
      o += x * inv * w;
      write_row(d.out, r, out);
      continue;
    }
    Eigen::Map<Eigen::ArrayXf>(row_target(d.out, r, out), dim) = x * inv * w;
    write_row(d.out, r, out);
  }
}

void rope(const RopeDesc& d) {
  validate(d);
  require_device("rope", Device::kHost, {&d.x, &d.out});
  const int hd = static_cast<int>(d.x.shape[2]);
  // fp32 heads with unit stride are rotated where they lie: RoPE runs in every forward pass.
  const bool direct = d.x.dtype == DType::kF32 && d.out.dtype == DType::kF32 &&
                      d.x.stride[2] == 1 && d.out.stride[2] == 1;
  RopeAngles angles(d.theta, hd);
  std::vector<float> buffer(hd);
  for (std::int64_t t = 0; t < d.x.shape[0]; ++t) {
    angles.at(d.position_offset + t, d.inverse);
    for (std::int64_t h = 0; h < d.x.shape[1]; ++h) {
      if (direct) {
        angles.rotate(static_cast<const float*>(d.x.data) + d.x.offset({t, h, 0}),
                      static_cast<float*>(d.out.data) + d.out.offset({t, h, 0}));
        continue;
      }
      for (int i = 0; i < hd; ++i) buffer[i] = load_float(d.x, d.x.offset({t, h, i}));
      angles.rotate(buffer.data(), buffer.data());
      for (int i = 0; i < hd; ++i) store_float(d.out, d.out.offset({t, h, i}), buffer[i]);
    }
  }
}

void swiglu(const SwigluDesc& d) {
  validate(d);
  require_device("swiglu", Device::kHost, {&d.gate, &d.up, &d.out});
  // Contiguous fp32 operands are one long row: one vectorised pass, as a forward's MLP needs.
  const bool whole = d.gate.contiguous() && d.up.contiguous() && d.out.contiguous() &&
                     direct_rows(d.gate) && direct_rows(d.up) && direct_rows(d.out);
  const std::int64_t rows = whole ? 1 : d.gate.shape[0];
  const std::int64_t cols = whole ? d.gate.numel() : d.gate.shape[1];
  std::vector<float> gate, up, out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto g = Eigen::Map<const Eigen::ArrayXf>(read_row(d.gate, r, gate), cols);
    const auto u = Eigen::Map<const Eigen::ArrayXf>(read_row(d.up, r, up), cols);
    auto o = Eigen::Map<Eigen::ArrayXf>(row_target(d.out, r, out), cols);
    if (d.act == SwigluDesc::Act::kSilu) {
      o = g / (1.0f + (-g).exp()) * u;
    } else {  // GELU, tanh approximation (PyTorch's gelu(approximate="tanh"))
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      o = 0.5f * g * (1.0f + (kSqrt2OverPi * (g + 0.044715f * g * g * g)).tanh()) * u;
    }
    write_row(d.out, r, out);
  }
}

void embed(const EmbedDesc& d) {
  validate(d);
  require_device("embed", Device::kHost, {&d.table, &d.ids, &d.out});
  const std::int64_t vocab = d.table.shape[0];
  for (std::int64_t t = 0; t < d.ids.shape[0]; ++t) {
    const std::int64_t id = static_cast<const std::int32_t*>(d.ids.data)[t * d.ids.stride[0]];
    for (std::int64_t i = 0; i < d.out.shape[1]; ++i) {
      const float v = (id >= 0 && id < vocab) ? load_float(d.table, d.table.offset({id, i})) : kNaN;
      store_float(d.out, d.out.offset({t, i}), v);
    }
  }
}

void fill_uniform(const FillDesc& d) {
  validate(d);
  require_device("fill_uniform", Device::kHost, {&d.out});
  const std::int64_t n = d.out.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    store_float(d.out, i, uniform_value(d.seed, static_cast<std::uint64_t>(i), d.lo, d.hi));
  }
}

void bias_rope_scatter(const EpilogueDesc& d) {
  validate(d);
  require_device("bias_rope_scatter", Device::kHost, {&d.z, &d.bias});
  for (const EpilogueSegment& s : d.segments) {
    require_device("bias_rope_scatter", Device::kHost, {&s.dst});
    const std::int64_t tokens = s.dst.shape[1], heads = s.dst.shape[2];
    const int hd = static_cast<int>(s.dst.shape[3]);
    RopeAngles angles(d.theta, hd);
    std::vector<float> head(hd), norm;
    if (!s.head_norm.empty()) {
      norm.resize(hd);
      for (int i = 0; i < hd; ++i) norm[i] = load_float(s.head_norm, s.head_norm.offset({i}));
    }
    // As rms_norm: the sum of squares in double, the scale in float.
    const auto normalise = [&] {
      if (norm.empty()) return;
      double sum = 0;
      for (int i = 0; i < hd; ++i) sum += double(head[i]) * head[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(sum / hd) + s.norm_eps);
      for (int i = 0; i < hd; ++i) head[i] = head[i] * inv * norm[i];
    };
    // fp32 heads with unit stride are read and written where they lie: the CPU forward runs
    // this epilogue in every layer.
    const bool direct = d.z.dtype == DType::kF32 && d.z.stride[1] == 1 &&
                        s.dst.dtype == DType::kF32 && s.dst.stride[3] == 1 &&
                        (d.bias.empty() || (d.bias.dtype == DType::kF32 && d.bias.stride[0] == 1));
    for (std::int64_t row = 0; row < d.z.shape[0]; ++row) {
      const std::int64_t r = row / tokens, t = row % tokens;
      if (s.rope) angles.at(d.position_offset + t, false);
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t col0 = s.column + h * hd;
        if (direct) {
          const float* z = static_cast<const float*>(d.z.data) + d.z.offset({row, col0});
          const float* bias =
              d.bias.empty() ? nullptr : static_cast<const float*>(d.bias.data) + col0;
          for (int i = 0; i < hd; ++i) head[i] = z[i] + (bias ? bias[i] : 0.0f);
          normalise();
          float* dst = static_cast<float*>(s.dst.data) + s.dst.offset({r, t, h, 0});
          if (s.rope) {
            angles.rotate(head.data(), dst);
          } else {
            std::copy(head.begin(), head.end(), dst);
          }
          continue;
        }
        for (int i = 0; i < hd; ++i) {
          const std::int64_t col = col0 + i;
          head[i] = load_float(d.z, d.z.offset({row, col})) +
                    (d.bias.empty() ? 0.0f : load_float(d.bias, d.bias.offset({col})));
        }
        normalise();
        if (s.rope) angles.rotate(head.data(), head.data());
        for (int i = 0; i < hd; ++i) store_float(s.dst, s.dst.offset({r, t, h, i}), head[i]);
      }
    }
  }
}

void anchor_gather(const AnchorGatherDesc& d) {
  validate(d);
  require_device("anchor_gather", Device::kHost, {&d.cache, &d.x});
  const std::int64_t tokens = d.cache.shape[3], heads = d.cache.shape[4];
  const int hd = static_cast<int>(d.cache.shape[5]);
  const std::int64_t half = heads * hd;
  RopeAngles angles(d.theta, hd);
  std::vector<float> head(hd);
  for (std::size_t a = 0; a < d.anchor_layers.size(); ++a) {
    const TensorView k = cache_layer(d.cache, d.anchor_layers[a], 0);
    const TensorView v = cache_layer(d.cache, d.anchor_layers[a], 1);
    const std::int64_t base = static_cast<std::int64_t>(a) * 2 * half;
    for (std::int64_t row = 0; row < d.x.shape[0]; ++row) {
      const std::int64_t r = row / tokens, t = row % tokens;
      angles.at(d.position_offset + t, true);
      for (std::int64_t h = 0; h < heads; ++h) {
        for (int i = 0; i < hd; ++i) head[i] = load_float(k, k.offset({r, t, h, i}));
        angles.rotate(head.data(), head.data());
        for (int i = 0; i < hd; ++i) {
          store_float(d.x, d.x.offset({row, base + h * hd + i}), head[i]);
          store_float(d.x, d.x.offset({row, base + half + h * hd + i}),
                      load_float(v, v.offset({r, t, h, i})));
        }
      }
    }
  }
}

}  // namespace kvshift::kernels::cpu
