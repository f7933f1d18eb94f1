// The HybridAxialMapper's forward (backend/proxy_mapper.cpp) as a sequence of
// kernels/ ops, written once and run by GpuMapper on the CUDA kernels and by
// the tests on their CPU twins. The weights are prepared on the host first
// (prepare_mapper): each layer's q|k|v stacked into one [3·width, width] GEMM,
// and the head's weight-only products folded as in HybridAxialMapper::forward:
//   head_keys = [kb·Wq; kf·Wq; out_w·Wv]   [sources + 2, width]
//   g = qb·kbᵀ [targets, sources], u = qb·kfᵀ [targets], vb = source_embed·(out_w·Wv)ᵀ,
//   vf = feature_proj·(out_w·Wv)ᵀ, qb = target_queries·Wqᵀ, kb = source_embed·Wkᵀ,
//   kf = feature_proj·Wkᵀ,
// so that E·head_keysᵀ gives each time's s[t, ·], c[t] and ve[t] in one GEMM and
// AxialHeadDesc does the rest. Residual adds are GEMMs with beta = 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/mapper_weights.hpp"
#include "kernels/ops.hpp"

namespace kvshift::backend::gpu {

/// A prepared host tensor: row-major fp32 `values` of `shape` (rank 1 or 2).
struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

/// A contiguous view of `shape` at `data` on `device`.
inline kernels::TensorView view_of(const std::vector<std::int64_t>& shape, void* data,
                                   kernels::Device device) {
  kernels::TensorView v;
  v.data = data;
  v.device = device;
  v.rank = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.stride[i] = stride;
    stride *= shape[i];
  }
  return v;
}

/// The mapper's tensors in the layouts the op sequence reads; T is a HostTensor (after
/// preparation) or a TensorView (where the ops read them).
template <typename T>
struct MapperTensors {
  struct Layer {
    T norm1_w, norm1_b, wqkv, bqkv, wo, bo, norm2_w, norm2_b, up, b_up, down, b_down;
  };
  T stem_w, stem_b;
  std::vector<Layer> layers;
  T norm_w, norm_b, head_keys, g, u, vb;

  /// The same tensors mapped through f (e.g. a host matrix to a device view).
  template <typename F>
  auto map(F&& f) const -> MapperTensors<decltype(f(stem_w))> {
    MapperTensors<decltype(f(stem_w))> out;
    out.stem_w = f(stem_w);
    out.stem_b = f(stem_b);
    for (const Layer& l : layers) {
      out.layers.push_back({f(l.norm1_w), f(l.norm1_b), f(l.wqkv), f(l.bqkv), f(l.wo), f(l.bo),
                            f(l.norm2_w), f(l.norm2_b), f(l.up), f(l.b_up), f(l.down),
                            f(l.b_down)});
    }
    for (auto [to, from] : {std::pair{&out.norm_w, &norm_w},
                            {&out.norm_b, &norm_b},
                            {&out.head_keys, &head_keys},
                            {&out.g, &g},
                            {&out.u, &u},
                            {&out.vb, &vb}}) {
      *to = f(*from);
    }
    return out;
  }
};

/// A mapper ready for the op sequence: its sizes, prepared tensors and head scalars.
struct PreparedMapper {
  MapperConfig config;
  MapperTensors<HostTensor> tensors;
  float vf = 0, out_b = 0, scale = 1;  ///< AxialHeadDesc's vf, out_bias, scale
};

/// Stacks, folds and checks (std::invalid_argument naming the tensor) a mapper's weights.
PreparedMapper prepare_mapper(const MapperWeights& w);

/// Activation buffers for up to `tokens` tokens (views on the ops' device).
struct MapperWorkspace {
  kernels::TensorView cols;   // [tokens, in_channels * kernel]
  kernels::TensorView h, a;   // [tokens, width]: residual stream, normed input
  kernels::TensorView qkv;    // [tokens, 3 * width]
  kernels::TensorView att;    // [tokens, width]
  kernels::TensorView f;      // [tokens, ffn]
  kernels::TensorView terms;  // [tokens, in_channels + 2]
  kernels::TensorView y;      // [targets, tokens]: one row stride of `tokens` columns
};

/// Shapes of a workspace for `tokens` tokens, in MapperWorkspace's field order.
inline std::vector<std::vector<std::int64_t>> workspace_shapes(const MapperConfig& c,
                                                               std::int64_t tokens) {
  return {{tokens, std::int64_t{c.in_channels} * c.kernel},
          {tokens, c.width},
          {tokens, c.width},
          {tokens, 3LL * c.width},
          {tokens, c.width},
          {tokens, c.ffn},
          {tokens, c.in_channels + 2LL},
          {c.targets, tokens}};
}

/// Runs the forward on `ops` (ops.run(desc) for every descriptor type used below): features x
/// [in_channels, T] f32 -> scores [targets, T], returned as a view into ws.y.
template <typename Ops>
kernels::TensorView run_mapper(const Ops& ops, const PreparedMapper& m,
                               const MapperTensors<kernels::TensorView>& w,
                               const MapperWorkspace& ws, const kernels::TensorView& x) {
  using kernels::slice;
  using kernels::TensorView;
  const MapperConfig& c = m.config;
  const std::int64_t T = x.shape[1], W = c.width, dh = W / c.heads;
  const auto rows = [T](const TensorView& v) { return slice(v, 0, 0, T); };
  const auto gemm = [&](const TensorView& a, const TensorView& b, const TensorView& out,
                        float beta) {
    ops.run(kernels::GemmDesc{a, b, out, true, 1.0f, beta});
  };
  const auto heads_of = [&](int part) {  // q, k or v of qkv as [T, heads, dh]
    TensorView v = rows(ws.qkv);
    v.data = static_cast<char*>(v.data) + part * W * kernels::dtype_size(v.dtype);
    v.rank = 3;
    v.shape = {T, c.heads, dh, 0, 0, 0};
    v.stride = {ws.qkv.stride[0], dh, 1, 0, 0, 0};
    return v;
  };
  const TensorView h = rows(ws.h), a = rows(ws.a), f = rows(ws.f), att = rows(ws.att);
  TensorView att3 = att;
  att3.rank = 3;
  att3.shape = {T, c.heads, dh, 0, 0, 0};
  att3.stride = {W, dh, 1, 0, 0, 0};
  using Act = kernels::BiasActDesc::Act;

  ops.run(kernels::Im2ColDesc{x, rows(ws.cols), c.kernel});
  gemm(rows(ws.cols), w.stem_w, h, 0);
  ops.run(kernels::BiasActDesc{h, w.stem_b, Act::kGelu, true});
  for (const auto& l : w.layers) {
    ops.run(kernels::LayerNormDesc{h, l.norm1_w, l.norm1_b, a});
    gemm(a, l.wqkv, rows(ws.qkv), 0);
    ops.run(kernels::BiasActDesc{rows(ws.qkv), l.bqkv, Act::kNone, false});
    ops.run(
        kernels::WindowAttentionDesc{heads_of(0), heads_of(1), heads_of(2), att3, c.window / 2});
    gemm(att, l.wo, h, 1);
    ops.run(kernels::BiasActDesc{h, l.bo, Act::kNone, false});
    ops.run(kernels::LayerNormDesc{h, l.norm2_w, l.norm2_b, a});
    gemm(a, l.up, f, 0);
    ops.run(kernels::BiasActDesc{f, l.b_up, Act::kGelu, false});
    gemm(f, l.down, h, 1);
    ops.run(kernels::BiasActDesc{h, l.b_down, Act::kNone, false});
  }
  ops.run(kernels::LayerNormDesc{h, w.norm_w, w.norm_b, a});
  gemm(a, w.head_keys, rows(ws.terms), 0);
  TensorView y = slice(ws.y, 1, 0, T);
  ops.run(kernels::AxialHeadDesc{x, w.g, w.u, w.vb, rows(ws.terms), y, m.vf, m.out_b, m.scale});
  return y;
}

}  // namespace kvshift::backend::gpu
