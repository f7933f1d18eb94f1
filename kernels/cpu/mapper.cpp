// CPU twins of the ops the HybridAxialMapper's forward needs besides GEMMs:
// im2col for the stem convolution, the bias + GELU (+ sinusoidal positions)
// epilogue, LayerNorm, and the factored head-axis cross-attention. Sums and
// softmaxes in double: these are the oracle, not the mapper the CPU backend
// runs (backend/proxy_mapper.cpp, Eigen in fp32).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/shared_math.hpp"

namespace kvshift::kernels::cpu {

void im2col(const Im2ColDesc& d) {
  validate(d);
  require_device("im2col", Device::kHost, {&d.x, &d.cols});
  const std::int64_t channels = d.x.shape[0], tokens = d.x.shape[1], r = d.kernel / 2;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t c = 0; c < channels; ++c) {
      for (std::int64_t j = 0; j < d.kernel; ++j) {
        const std::int64_t s = t + j - r;
        const float v = s >= 0 && s < tokens ? load_float(d.x, d.x.offset({c, s})) : 0.0f;
        store_float(d.cols, d.cols.offset({t, c * d.kernel + j}), v);
      }
    }
  }
}

void bias_act(const BiasActDesc& d) {
  validate(d);
  require_device("bias_act", Device::kHost, {&d.x, &d.bias});
  const auto width = static_cast<int>(d.x.shape[1]);
  for (std::int64_t t = 0; t < d.x.shape[0]; ++t) {
    for (int i = 0; i < width; ++i) {
      const std::int64_t off = d.x.offset({t, i});
      float v = load_float(d.x, off) + load_float(d.bias, d.bias.offset({i}));
      if (d.act == BiasActDesc::Act::kGelu) v = gelu_erf(v);
      if (d.positions) v += sinusoidal_position(t, i, width);
      store_float(d.x, off, v);
    }
  }
}

void layer_norm(const LayerNormDesc& d) {
  validate(d);
  require_device("layer_norm", Device::kHost, {&d.x, &d.weight, &d.bias, &d.out});
  const std::int64_t dim = d.x.shape[1];
  std::vector<double> row(dim);
  for (std::int64_t r = 0; r < d.x.shape[0]; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < dim; ++i) mean += row[i] = load_float(d.x, d.x.offset({r, i}));
    mean /= static_cast<double>(dim);
    for (double v : row) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(dim) + d.eps);
    for (std::int64_t i = 0; i < dim; ++i) {
      const double v = (row[i] - mean) * inv * load_float(d.weight, d.weight.offset({i})) +
                       load_float(d.bias, d.bias.offset({i}));
      store_float(d.out, d.out.offset({r, i}), static_cast<float>(v));
    }
  }
}

void axial_head(const AxialHeadDesc& d) {
  validate(d);
  require_device("axial_head", Device::kHost, {&d.x, &d.g, &d.u, &d.vb, &d.time_terms, &d.y});
  const std::int64_t sources = d.x.shape[0], tokens = d.x.shape[1], targets = d.g.shape[0];
  std::vector<double> logit(sources);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const double c = load_float(d.time_terms, d.time_terms.offset({t, sources}));
    const double ve = load_float(d.time_terms, d.time_terms.offset({t, sources + 1}));
    for (std::int64_t j = 0; j < targets; ++j) {
      const double u = load_float(d.u, d.u.offset({j}));
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t i = 0; i < sources; ++i) {
        const double x = load_float(d.x, d.x.offset({i, t}));
        logit[i] = d.scale * (load_float(d.g, d.g.offset({j, i})) + u * x +
                              load_float(d.time_terms, d.time_terms.offset({t, i})) + c * x);
        m = std::max(m, logit[i]);
      }
      double sum = 0, acc = 0;
      for (std::int64_t i = 0; i < sources; ++i) {
        const double p = std::exp(logit[i] - m);
        const double value = load_float(d.vb, d.vb.offset({i})) +
                             static_cast<double>(d.vf) * load_float(d.x, d.x.offset({i, t}));
        sum += p;
        acc += p * value;
      }
      store_float(d.y, d.y.offset({j, t}), static_cast<float>(acc / sum + ve + d.out_bias));
    }
  }
}

}  // namespace kvshift::kernels::cpu
