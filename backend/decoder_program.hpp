// The Llama-family decoder as a sequence of kernels/ ops, written once: the CPU
// model (backend/model.cpp) runs it on the CPU twins in fp32, GpuModel
// (backend/cuda/gpu_model.cpp) on the CUDA kernels with bf16 GEMM inputs and
// KV. A backend supplies the views — its weights (fused or one GEMM per
// projection), its activation buffers and its KV cache layout — and the ops;
// the order of the ops and what feeds what live here only.
//
// One layer over the rows of a pass (new tokens of a prefill, or one token per
// request of a decode step):
//   h = RMSNorm(x);  z = h·[Wq|Wk|Wv]ᵀ;  bias + RoPE + scatter of z (Q to the
//   query buffer, K and V into the cache);  attention (and the attention masses
//   asked for);  x += attn·Woᵀ;  h = RMSNorm(x);  gate|up = h·[Wgate|Wup]ᵀ;
//   act = SiLU(gate)·up;  x += act·Wdownᵀ.
// Gemma 3 (the optional weights below present): the epilogue also RMSNorms each
// query and key head before RoPE, the output projections go to h and reach x
// through a norm (x += RMSNorm(attn·Woᵀ), x += RMSNorm(act·Wdownᵀ)), and the
// gate is GELU (tanh) instead of SiLU.
// The head: h = RMSNorm(x rows);  logits = h·Wheadᵀ.
#pragma once

#include <span>
#include <vector>

#include "kernels/ops.hpp"

namespace kvshift::backend {

/// One GEMM of a projection: out = in·weightᵀ, weight [out columns, in columns].
struct ProjectionPart {
  kernels::TensorView weight;
  kernels::TensorView out;
};

/// One layer's weights and where its projections write, as the ops read them.
struct DecoderLayerWeights {
  kernels::TensorView attn_norm, mlp_norm;  // [hidden] f32
  /// z = h·[Wq|Wk|Wv]ᵀ: one fused GEMM into z, or one per projection into z's columns.
  std::vector<ProjectionPart> qkv;
  kernels::TensorView wo;  // [hidden, q_heads·head_dim]
  /// gate|up = h·[Wgate|Wup]ᵀ: one fused GEMM, or one each.
  std::vector<ProjectionPart> gate_up;
  kernels::TensorView w_down;                         // [hidden, intermediate]
  kernels::TensorView post_attn_norm, post_mlp_norm;  // [hidden] f32, Gemma 3 only
  kernels::SwigluDesc::Act act = kernels::SwigluDesc::Act::kSilu;
};

/// What one layer of one pass reads and writes beyond its weights.
struct DecoderLayerPass {
  kernels::TensorView x;  // [rows, hidden] f32: the residual stream, updated in place
  kernels::TensorView h;  // [rows, hidden]: the normed input of attention, then of the MLP
  /// z (the qkv parts' output) to the query buffer and the cache, bias and RoPE applied: one
  /// epilogue, or one per request when their caches lie apart.
  std::vector<kernels::EpilogueDesc> scatter;
  /// Causal attention of the queries over the cache into `attn`: one call, or one per request.
  std::vector<kernels::AttentionDesc> attention;
  std::vector<kernels::AttentionMassDesc> masses;  ///< after attention, reading its lse
  kernels::TensorView attn;                        // [rows, q_heads·head_dim]
  kernels::TensorView gate, up, act;               // [rows, intermediate]; act may be gate
  float eps = 1e-6f;
};

/// Runs one layer on `ops` (ops.run(desc) for each descriptor type used below).
/// `after_projection()` runs once h and z hold this layer's values, before they are used:
/// the CPU model's capture hooks read them there.
template <typename Ops, typename AfterProjection>
void run_decoder_layer(const Ops& ops, const DecoderLayerWeights& w, const DecoderLayerPass& p,
                       AfterProjection&& after_projection) {
  const auto gemm = [&](const kernels::TensorView& a, const kernels::TensorView& b,
                        const kernels::TensorView& c, float beta) {
    ops.run(kernels::GemmDesc{a, b, c, true, 1.0f, beta});
  };
  ops.run(kernels::RmsNormDesc{p.x, w.attn_norm, p.h, p.eps});
  for (const ProjectionPart& part : w.qkv) gemm(p.h, part.weight, part.out, 0);
  after_projection();
  for (const kernels::EpilogueDesc& e : p.scatter) ops.run(e);
  for (const kernels::AttentionDesc& a : p.attention) ops.run(a);
  for (const kernels::AttentionMassDesc& m : p.masses) ops.run(m);
  // x += out·Wᵀ, or through the sublayer's norm after it (h is free at both points).
  const auto residual = [&](const kernels::TensorView& out, const kernels::TensorView& weight,
                            const kernels::TensorView& post_norm) {
    if (post_norm.empty()) return gemm(out, weight, p.x, 1);
    gemm(out, weight, p.h, 0);
    ops.run(kernels::RmsNormDesc{p.h, post_norm, p.x, p.eps, true});
  };
  residual(p.attn, w.wo, w.post_attn_norm);
  ops.run(kernels::RmsNormDesc{p.x, w.mlp_norm, p.h, p.eps});
  for (const ProjectionPart& part : w.gate_up) gemm(p.h, part.weight, part.out, 0);
  ops.run(kernels::SwigluDesc{p.gate, p.up, p.act, w.act});
  residual(p.act, w.w_down, w.post_mlp_norm);
}

/// The head: logits [rows, vocab] of the residual rows `x` [rows, hidden] through the final
/// norm (into h [rows, hidden]) and the output projection `head` [vocab, hidden].
template <typename Ops>
void run_decoder_head(const Ops& ops, const kernels::TensorView& final_norm,
                      const kernels::TensorView& head, const kernels::TensorView& x,
                      const kernels::TensorView& h, const kernels::TensorView& logits, float eps) {
  ops.run(kernels::RmsNormDesc{x, final_norm, h, eps});
  ops.run(kernels::GemmDesc{h, head, logits, true, 1.0f, 0.0f});
}

}  // namespace kvshift::backend
