// Roofline arithmetic behind RooflineCosts. Kernel counts per layer follow a
// straightforward Llama implementation: 2 norms, fused QKV + RoPE, attention,
// output projection, gate/up, SwiGLU, down, 2 residual adds.
#include <algorithm>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"

namespace kvshift::cost_model {
namespace {

constexpr int kKernelsPerLayer = 10;
constexpr int kKernelsPerGroup = 4;  // inverse RoPE, GEMM+bias, RoPE, scatter

// The ProxyKV mapper's shape: tools/train_mapper.py's default architecture, which the committed
// mappers use (results/proxykv/*/mapper.json). A measured cost table times the real one.
struct MapperShape {
  int width = 64, layers = 2, ffn = 128, kernel = 3, window = 128;
  // stem + GELU + positions, per layer (2 norms, QKV, attention, output, 2 FFN, 2 adds),
  // final norm, the cross-attention's 4 steps
  constexpr int kernels() const { return 3 + 9 * layers + 1 + 4; }
};
constexpr MapperShape kMapper{};

}  // namespace

RooflineCosts::RooflineCosts(GpuSpec gpu) : gpu_(std::move(gpu)) {}

double RooflineCosts::compute_s(double flops, double efficiency) const {
  return flops / (gpu_.peak_dense_fp16.value * efficiency);
}

double RooflineCosts::memory_s(double bytes) const {
  return 8.0 * bytes / (gpu_.hbm_bandwidth.value * gpu_.memory_efficiency);
}

double RooflineCosts::prefill_flops(const ModelSpec& m, std::int64_t tokens) {
  const double t = static_cast<double>(tokens);
  const double linear = 2.0 * static_cast<double>(m.layer_parameter_count()) * t;
  // QKᵀ and PV over the causal triangle: 2 GEMMs · 2 FLOP · hq·dh · T(T+1)/2 per layer.
  const double attention = 2.0 * m.layers * m.q_heads * m.head_dim * t * (t + 1.0);
  const double logits = 2.0 * m.vocab * static_cast<double>(m.hidden);  // last token only
  return linear + attention + logits;
}

double RooflineCosts::reconstruct_flops(const ModelSpec& m, const OmissionPlan& t,
                                        std::int64_t rows) {
  double flops = 0;
  for (const GroupPlan& g : t.groups()) {
    flops += 2.0 * static_cast<double>(rows) * static_cast<double>(folded_params(m, g));
  }
  return flops;
}

Seconds RooflineCosts::prefill(const ModelSpec& m, std::int64_t tokens) const {
  return extend(m, 0, tokens);
}

Seconds RooflineCosts::extend(const ModelSpec& m, std::int64_t prefix, std::int64_t tokens) const {
  const double t = static_cast<double>(tokens);
  const double p = static_cast<double>(std::max<std::int64_t>(prefix, 0));
  const double wbytes = dtype_bytes(m.weight_dtype);
  const double weights =
      (static_cast<double>(m.layer_parameter_count()) + static_cast<double>(m.vocab) * m.hidden) *
      wbytes;
  const double linear_flops = 2.0 * static_cast<double>(m.layer_parameter_count()) * t +
                              2.0 * m.vocab * static_cast<double>(m.hidden);
  const double gemm = std::max(compute_s(linear_flops, gpu_.gemm_efficiency), memory_s(weights));
  // Token i (1-based) attends to i positions; the new ones are p+1 .. p+t.
  const double per_pair = 2.0 * m.layers * m.q_heads * m.head_dim;
  const double attn_flops = per_pair * (p + t) * (p + t + 1.0) - per_pair * p * (p + 1.0);
  const double prefix_read = static_cast<double>(kv_bytes(m, prefix).count);
  const double attention =
      std::max(compute_s(attn_flops, gpu_.attention_efficiency), memory_s(prefix_read));
  // Element-wise traffic (norms, RoPE, SwiGLU, residuals) and the KV write.
  const double act_bytes = m.layers * t * (6.0 * m.hidden + 3.0 * m.intermediate) * wbytes;
  const double kv_write = static_cast<double>(kv_bytes(m, tokens).count);
  const double launches = (kKernelsPerLayer * m.layers + 3) * gpu_.launch_overhead.value;
  return {gemm + attention + memory_s(act_bytes + kv_write) + launches};
}

Seconds RooflineCosts::decode_step(const ModelSpec& m, std::int64_t batch,
                                   std::int64_t context_tokens) const {
  const double b = static_cast<double>(batch);
  const double wbytes = dtype_bytes(m.weight_dtype);
  const double params =
      static_cast<double>(m.layer_parameter_count()) + static_cast<double>(m.vocab) * m.hidden;
  const double gemm =
      std::max(compute_s(2.0 * params * b, gpu_.gemm_efficiency), memory_s(params * wbytes));
  const double ctx = static_cast<double>(context_tokens);
  const double kv_read = ctx * m.layers * static_cast<double>(m.kv_bytes_per_layer_token());
  const double attention =
      std::max(compute_s(4.0 * m.layers * m.q_heads * m.head_dim * ctx, gpu_.attention_efficiency),
               memory_s(kv_read));
  const double launches = (kKernelsPerLayer * m.layers + 3) * gpu_.launch_overhead.value;
  return {gemm + attention + launches};
}

Seconds RooflineCosts::reconstruct(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                                   std::int64_t requests, DType predictor_dtype) const {
  const double rows = static_cast<double>(tokens) * static_cast<double>(requests);
  const double bkv = dtype_bytes(m.kv_dtype);
  const double w = static_cast<double>(m.kv_width());
  double total = 0;
  for (const GroupPlan& g : t.groups()) {
    const double in = static_cast<double>(g.anchor_layers.size()) * w;
    const double out = static_cast<double>(g.target_layers.size()) * w;
    const double params = static_cast<double>(folded_params(m, g));
    const double gemm =
        std::max(compute_s(2.0 * rows * params, gpu_.gemm_efficiency),
                 memory_s(params * dtype_bytes(predictor_dtype) + rows * (in + out) * bkv));
    // Inverse RoPE on anchor keys (read+write half of X), RoPE + scatter of the output.
    const double elementwise = memory_s(rows * (in + 2.0 * out) * bkv);
    total += gemm + elementwise + kKernelsPerGroup * gpu_.launch_overhead.value;
  }
  return {total};
}

// ProxyKV scoring, as backend/proxy_scoring.cpp runs it: the proxy's prefill; the attention
// mass each key receives (one more QKᵀ over the causal triangle per proxy layer and head, then
// a mean and a log per layer·head·token); the mapper (stem convolution, windowed encoder,
// cross-attention over the head axis in its factored form) at kMapper's shape.
Seconds RooflineCosts::proxy_score(const ModelSpec& proxy, const ModelSpec& target,
                                   std::int64_t tokens) const {
  const double t = static_cast<double>(tokens);
  const double sources = static_cast<double>(proxy.layers) * proxy.q_heads;
  const double targets = static_cast<double>(target.layers) * target.kv_heads;
  const double mass_flops =
      static_cast<double>(proxy.layers) * proxy.q_heads * proxy.head_dim * t * (t + 1.0);
  const double features = compute_s(mass_flops, gpu_.attention_efficiency) +
                          memory_s(2.0 * 4.0 * sources * t);  // f32 mass, written and read
  const double w = kMapper.width, window = std::min<double>(kMapper.window + 1.0, t);
  const double stem = 2.0 * t * sources * w * kMapper.kernel;
  const double encoder = kMapper.layers * (2.0 * t * 4.0 * w * w                // QKV and output
                                           + 4.0 * t * window * w               // QKᵀ and PV
                                           + 2.0 * t * 2.0 * w * kMapper.ffn);  // FFN
  const double cross = 2.0 * t * targets * (2.0 * sources + 2.0 * w);
  const double mapper = compute_s(stem + encoder + cross, gpu_.gemm_efficiency) +
                        memory_s(4.0 * t * (sources + targets + 4.0 * w)) +
                        kMapper.kernels() * gpu_.launch_overhead.value;
  return {prefill(proxy, tokens).value + features + mapper};
}

Seconds RooflineCosts::prune(const ModelSpec& m, std::int64_t tokens, double retention) const {
  const double t = static_cast<double>(tokens);
  const double scores = 4.0 * m.layers * m.kv_heads * t;  // f32, one per (layer, KV head, token)
  const double kept = retention * static_cast<double>(kv_bytes(m, tokens).count);
  const double launches = (2.0 * m.layers + 1.0) * gpu_.launch_overhead.value;
  return {memory_s(scores + 2.0 * kept) + launches};
}

std::vector<OpSource> RooflineCosts::sources() const {
  std::vector<OpSource> out;
  for (const std::string& op : compute_ops()) {
    out.push_back({op, "analytic (roofline of " + gpu_.name + ")", 0, 0});
  }
  return out;
}

}  // namespace kvshift::cost_model
