// GPU recovery benchmark: for each model, token replay (prefill) versus RISK-KV
// local recovery (reconstruction of the paper's topology, the kept KV already
// resident on the GPU) at the given context lengths, timed by the CUDA
// profiler, with the ceilings measured in the same run (device-to-device copy
// bandwidth, counting bytes read and written; a large bf16 cuBLAS GEMM). Per
// model and T it also times one layer's prefill attention alone: the
// FlashAttention-2 kernel that cuda::attention runs against the earlier WMMA
// kernel, with the relative difference of their outputs.
// Writes one JSON document (models' shapes, ceilings, rows with FLOPs and
// minimum bytes) for bench/gpu_table.py. Depends on no JSON or CLI library so
// it builds on a bare CUDA machine.
//
// usage: gpu_recovery_bench --out FILE [--models a,b] [--tokens 512,4096] [--repeats N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/profiler.hpp"
#include "cost_model/model_spec.hpp"
#include "cost_model/omission_plan.hpp"
#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"

namespace {

using kvshift::cost_model::ModelSpec;
namespace kc = kvshift::kernels::cuda;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// Median seconds of `body` over `repeats` event-timed runs after two warm-ups.
template <typename F>
double median_seconds(int repeats, F&& body) {
  cudaEvent_t a, b;
  KVSHIFT_CUDA_CHECK(cudaEventCreate(&a));
  KVSHIFT_CUDA_CHECK(cudaEventCreate(&b));
  body();
  body();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    KVSHIFT_CUDA_CHECK(cudaEventRecord(a));
    body();
    KVSHIFT_CUDA_CHECK(cudaEventRecord(b));
    KVSHIFT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    KVSHIFT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Ceilings {
  double copy_bytes_per_s = 0;  ///< (read + write) bytes per second
  double bf16_flops = 0;
};

Ceilings measure_ceilings() {
  Ceilings c;
  const std::size_t bytes = std::size_t{4} << 30;
  kc::DeviceBuffer src(bytes), dst(bytes);
  kc::fill_uniform(
      {src.view(kvshift::kernels::DType::kF32, {static_cast<std::int64_t>(bytes / 4)}), 1, -1, 1},
      nullptr);
  const double copy = median_seconds(10, [&] {
    KVSHIFT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice));
  });
  c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / copy;
  const std::int64_t n = 8192;
  using kvshift::kernels::DType;
  kc::DeviceBuffer a(n * n * 2), b(n * n * 2), out(n * n * 2);
  kc::fill_uniform({a.view(DType::kBF16, {n, n}), 2, -1, 1}, nullptr);
  kc::fill_uniform({b.view(DType::kBF16, {n, n}), 3, -1, 1}, nullptr);
  kc::Context ctx;
  const double gemm = median_seconds(10, [&] {
    kc::gemm({a.view(DType::kBF16, {n, n}), b.view(DType::kBF16, {n, n}),
              out.view(DType::kBF16, {n, n})},
             ctx);
  });
  c.bf16_flops = 2.0 * n * n * n / gemm;
  return c;
}

double prefill_flops(const ModelSpec& m, double t) {
  const double d = m.hidden, hd = m.head_dim, hq = m.q_heads, hkv = m.kv_heads,
               inter = m.intermediate;
  const double linear = 2 * t * (d * (hq + 2 * hkv) * hd + hq * hd * d + 3 * inter * d);
  const double attention = 2 * 2 * hq * hd * t * (t + 1) / 2;  // QK^T and PV, causal
  return m.layers * (linear + attention) + 2 * d * m.vocab;
}

double prefill_min_bytes(const ModelSpec& m, double t) {
  const double head = 2.0 * m.vocab * m.hidden;  // the logits of the last token read the whole head
  return 2.0 * m.layer_parameter_count() + head + 2.0 * t * m.hidden +
         2.0 * m.layers * t * m.kv_width();
}

struct ReconstructWork {
  double flops = 0, bytes = 0;
};

ReconstructWork reconstruct_work(const ModelSpec& m, const kvshift::cost_model::OmissionPlan& topo,
                                 double t, double n, int predictor_bytes) {
  ReconstructWork r;
  const double w = static_cast<double>(m.kv_width());
  for (const auto& g : topo.groups()) {
    const double a = g.anchor_layers.size() * w, o = g.target_layers.size() * w;
    r.flops += 2 * n * t * a * o;
    r.bytes += n * t * a * 2 + a * o * predictor_bytes + o * 4 + n * t * o * 2;
  }
  return r;
}

/// FLOPs of one layer's causal attention at T tokens (Q K^T and P V over the lower triangle).
double attention_flops(const ModelSpec& m, double t) {
  return 2.0 * 2.0 * m.q_heads * m.head_dim * t * (t + 1) / 2;
}

/// One layer's prefill attention alone at T tokens (bf16, random q/k/v): the FlashAttention-2
/// kernel cuda::attention runs and the earlier WMMA kernel, timed the same way, and the relative
/// L2 difference of their outputs (a check at lengths the conformance test does not reach).
struct AttentionRows {
  double fa2_s = 0, wmma_s = 0, rel_diff = 0;
};

AttentionRows time_attention(const ModelSpec& m, std::int64_t t, int repeats) {
  using kvshift::kernels::DType;
  const std::int64_t hq = m.q_heads, hkv = m.kv_heads, hd = m.head_dim;
  const auto bytes = [](std::int64_t elements) { return static_cast<std::size_t>(elements) * 2; };
  kc::DeviceBuffer q(bytes(t * hq * hd)), k(bytes(t * hkv * hd)), v(bytes(t * hkv * hd));
  kc::DeviceBuffer out_fa2(bytes(t * hq * hd)), out_wmma(bytes(t * hq * hd));
  kc::fill_uniform({q.view(DType::kBF16, {t * hq * hd}), 11, -2, 2}, nullptr);
  kc::fill_uniform({k.view(DType::kBF16, {t * hkv * hd}), 12, -2, 2}, nullptr);
  kc::fill_uniform({v.view(DType::kBF16, {t * hkv * hd}), 13, -1, 1}, nullptr);
  const auto desc = [&](const kc::DeviceBuffer& out) {
    return kvshift::kernels::AttentionDesc{
        q.view(DType::kBF16, {t, hq, hd}), k.view(DType::kBF16, {t, hkv, hd}),
        v.view(DType::kBF16, {t, hkv, hd}), out.view(DType::kBF16, {t, hq, hd})};
  };
  AttentionRows r;
  r.fa2_s = median_seconds(repeats, [&] { kc::attention(desc(out_fa2), nullptr); });
  r.wmma_s = median_seconds(repeats, [&] { kc::attention_wmma(desc(out_wmma), nullptr); });
  kc::device_synchronize();
  std::vector<std::uint16_t> a(static_cast<std::size_t>(t * hq * hd)), b(a.size());
  out_fa2.download(a.data(), a.size() * 2);
  out_wmma.download(b.data(), b.size() * 2);
  const auto f32 = [](std::uint16_t bits) {
    const std::uint32_t u = std::uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return static_cast<double>(f);
  };
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (f32(a[i]) - f32(b[i])) * (f32(a[i]) - f32(b[i]));
    den += f32(b[i]) * f32(b[i]);
  }
  r.rel_diff = den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
  return r;
}

std::string device_name() {
  cudaDeviceProp p{};
  KVSHIFT_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  return p.name;
}

struct Args {
  std::string out_path, models = "qwen2.5-0.5b,qwen2.5-1.5b,tinyllama-1.1b",
                        tokens = "512,4096,32768";
  int repeats = 10;
};

/// The flags, or nullopt after printing why not.
std::optional<Args> parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--out")
      a.out_path = value;
    else if (flag == "--models")
      a.models = value;
    else if (flag == "--tokens")
      a.tokens = value;
    else if (flag == "--repeats")
      a.repeats = std::stoi(value);
    else {
      std::cerr << "gpu_recovery_bench: unknown flag " << flag << "\n";
      return std::nullopt;
    }
  }
  if (a.out_path.empty()) {
    std::cerr << "usage: gpu_recovery_bench --out FILE [--models a,b] [--tokens 512,4096] "
                 "[--repeats N]\n";
    return std::nullopt;
  }
  return a;
}

/// The model's object up to its "rows" array.
void model_header(std::ostream& json, const ModelSpec& m,
                  const kvshift::cost_model::OmissionPlan& topo) {
  json << "    {\"name\": \"" << m.name << "\", \"layers\": " << m.layers
       << ", \"hidden\": " << m.hidden << ", \"q_heads\": " << m.q_heads
       << ", \"kv_heads\": " << m.kv_heads << ", \"head_dim\": " << m.head_dim
       << ", \"intermediate\": " << m.intermediate << ", \"vocab\": " << m.vocab
       << ", \"rope_theta\": " << m.rope_theta << ", \"rms_eps\": " << m.rms_eps
       << ", \"attention_bias\": " << (m.attention_bias ? "true" : "false")
       << ", \"tied_embeddings\": " << (m.tied_embeddings ? "true" : "false")
       << ", \"topology\": \"" << topo.describe() << "\", \"rows\": [";
}

/// The rows of one prompt length: prefill and reconstruction through the profiler, then one
/// layer's attention by both kernels.
void length_rows(std::ostream& json, kvshift::backend::Profiler& profiler, const ModelSpec& m,
                 const kvshift::cost_model::OmissionPlan& topo, std::int64_t t, int repeats,
                 bool& first_row) {
  kvshift::backend::ProfileRequest req;
  req.model = m;
  req.omission = topo;
  req.tokens = {t};
  req.sharing = {1};
  req.predictor_dtype = kvshift::cost_model::DType::kBF16;
  req.warmup = t > 8192 ? 1 : 2;
  req.repeats = t > 8192 ? 3 : repeats;
  for (const auto& row : profiler.run(req)) {
    if (row.op != "prefill" && row.op != "reconstruct") continue;
    const bool prefill = row.op == "prefill";
    const auto rw = reconstruct_work(m, topo, static_cast<double>(t), 1.0, 2);
    const double flops = prefill ? prefill_flops(m, static_cast<double>(t)) : rw.flops;
    const double bytes = prefill ? prefill_min_bytes(m, static_cast<double>(t)) : rw.bytes;
    std::cerr << m.name << " T=" << t << " " << row.op << ": " << row.median_s * 1e3 << " ms\n";
    json << (first_row ? "\n" : ",\n") << "      {\"op\": \"" << row.op << "\", \"tokens\": " << t
         << ", \"sharing\": " << row.sharing << ", \"median_s\": " << row.median_s
         << ", \"p10_s\": " << row.p10_s << ", \"p90_s\": " << row.p90_s
         << ", \"repeats\": " << row.repeats << ", \"flops\": " << flops
         << ", \"min_bytes\": " << bytes << "}";
    first_row = false;
  }
  const AttentionRows att = time_attention(m, t, t > 8192 ? 3 : repeats);
  const double aflops = attention_flops(m, static_cast<double>(t));
  std::cerr << m.name << " T=" << t << " attention (one layer): FlashAttention-2 kernel "
            << att.fa2_s * 1e3 << " ms, WMMA kernel " << att.wmma_s * 1e3
            << " ms, relative difference " << att.rel_diff << "\n";
  for (const auto& [op, sec] :
       {std::pair{"attention_fa2", att.fa2_s}, std::pair{"attention_wmma", att.wmma_s}}) {
    json << ",\n      {\"op\": \"" << op << "\", \"tokens\": " << t
         << ", \"sharing\": 1, \"median_s\": " << sec << ", \"flops\": " << aflops
         << ", \"fa2_vs_wmma_rel_diff\": " << att.rel_diff << "}";
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Args> args = parse_args(argc, argv);
  if (!args) return 2;
  try {
    auto profiler = kvshift::backend::make_cuda_profiler();
    std::cerr << "device: " << profiler->device_description() << "\n";
    const Ceilings ceil = measure_ceilings();
    std::cerr << "ceilings: copy " << ceil.copy_bytes_per_s / 1e12 << " TB/s, bf16 GEMM "
              << ceil.bf16_flops / 1e12 << " TFLOP/s\n";
    std::ostringstream json;
    json.precision(9);
    json << "{\n  \"device\": \"" << device_name() << "\",\n  \"device_description\": \""
         << profiler->device_description()
         << "\",\n  \"ceilings\": {\"copy_bytes_per_s\": " << ceil.copy_bytes_per_s
         << ", \"bf16_gemm_flops\": " << ceil.bf16_flops << "},\n  \"models\": [";
    bool first_model = true;
    for (const std::string& name : split(args->models)) {
      const ModelSpec& m = kvshift::cost_model::find_model(name);
      const auto topo = kvshift::cost_model::OmissionPlan::parse("paper", m);
      json << (first_model ? "\n" : ",\n");
      model_header(json, m, topo);
      first_model = false;
      bool first_row = true;
      for (const std::string& tok : split(args->tokens)) {
        length_rows(json, *profiler, m, topo, std::stoll(tok), args->repeats, first_row);
      }
      json << "\n    ]}";
    }
    json << "\n  ]\n}\n";
    std::ofstream(args->out_path) << json.str();
    std::cerr << "wrote " << args->out_path << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gpu_recovery_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
