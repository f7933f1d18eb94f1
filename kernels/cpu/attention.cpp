// CPU twins of causal GQA attention, of the attention-mass reduction (sum or
// max over queries) and of the mapper's non-causal sliding-window attention.
// The tiled version keeps a running max, sum and accumulator per query (the
// same online softmax the CUDA kernel uses); the naive version materialises one
// query's softmax row and is the oracle the tiled one is tested against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::cpu {
namespace {

constexpr std::int64_t kKeyTile = 16;

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

void check_host(const AttentionDesc& d) {
  validate(d);
  require_device("attention", Device::kHost, {&d.q, &d.k, &d.v, &d.out, &d.lse});
}

}  // namespace

void attention(const AttentionDesc& d) {
  check_host(d);
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1], hd = d.q.shape[2];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, hd);
  std::vector<float> acc(hd);
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      const std::int64_t last = offset + i;  // keys 0..last are visible
      float m = -std::numeric_limits<float>::infinity(), l = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t j0 = 0; j0 <= last; j0 += kKeyTile) {
        const std::int64_t j1 = std::min(last + 1, j0 + kKeyTile);
        float s[kKeyTile];
        float tile_max = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = j0; j < j1; ++j) {
          s[j - j0] = score(d.q, d.k, i, h, j, kh, scale);
          tile_max = std::max(tile_max, s[j - j0]);
        }
        const float m_new = std::max(m, tile_max);
        const float correction = std::exp(m - m_new);
        l *= correction;
        for (float& a : acc) a *= correction;
        for (std::int64_t j = j0; j < j1; ++j) {
          const float p = std::exp(s[j - j0] - m_new);
          l += p;
          for (std::int64_t e = 0; e < hd; ++e)
            acc[e] += p * load_float(d.v, d.v.offset({j, kh, e}));
        }
        m = m_new;
      }
      for (std::int64_t e = 0; e < hd; ++e) store_float(d.out, d.out.offset({i, h, e}), acc[e] / l);
      if (!d.lse.empty()) store_float(d.lse, d.lse.offset({i, h}), m + std::log(l));
    }
  }
}

void attention_naive(const AttentionDesc& d) {
  check_host(d);
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1], hd = d.q.shape[2];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, hd);
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      const std::int64_t visible = offset + i + 1;
      std::vector<double> p(visible);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < visible; ++j) {
        p[j] = score(d.q, d.k, i, h, j, kh, scale);
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - m));
      for (std::int64_t e = 0; e < hd; ++e) {
        double o = 0;
        for (std::int64_t j = 0; j < visible; ++j)
          o += p[j] * load_float(d.v, d.v.offset({j, kh, e}));
        store_float(d.out, d.out.offset({i, h, e}), static_cast<float>(o / sum));
      }
      if (!d.lse.empty())
        store_float(d.lse, d.lse.offset({i, h}), static_cast<float>(m + std::log(sum)));
    }
  }
}

void attention_mass(const AttentionMassDesc& d) {
  validate(d);
  require_device("attention_mass", Device::kHost, {&d.q, &d.k, &d.lse, &d.out});
  const std::int64_t tq = d.q.shape[0], tk = d.k.shape[0], hq = d.q.shape[1];
  const std::int64_t group = hq / d.k.shape[1], offset = tk - tq;
  const float scale = effective_scale(d.scale, d.q.shape[2]);
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kh = h / group;
    std::vector<double> mass(tk, 0.0);
    for (std::int64_t i = d.query_begin; i < tq; ++i) {
      const float lse = load_float(d.lse, d.lse.offset({i, h}));
      for (std::int64_t j = 0; j <= offset + i; ++j) {
        const float p = std::exp(score(d.q, d.k, i, h, j, kh, scale) - lse);
        mass[j] = d.reduce == Reduce::kSum ? mass[j] + p : std::max<double>(mass[j], p);
      }
    }
    for (std::int64_t j = 0; j < tk; ++j) {
      store_float(d.out, d.out.offset({h, j}), static_cast<float>(mass[j]));
    }
  }
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
