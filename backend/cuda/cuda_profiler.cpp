// The CUDA profiler: times, on a GpuModel with the checkpoint's weights
// (ProfileRequest::inputs) or seeded random bf16 ones, prefill (token replay)
// and a decode step of B requests at C context tokens each; RISK-KV
// reconstruction of the request's topology for N requests sharing the
// predictors (the calibrated ones or seeded random; anchor gather -> cuBLAS GEMM
// -> bias + RoPE + scatter, replayed from a CUDA Graph when launch-bound);
// proxy scoring, all on the proxy's own stream: the proxy's prefill with
// attention mass, log_mean_attention, and the trained mapper (GpuMapper, fp32);
// pruning (top-K per KV head + compaction of every layer's K and V); and
// predictor_load (the real predictors' host -> device copy). Only the ops
// ProfileRequest::ops asks for run, and only their weights are built.
// Left out: without a trained mapper (ProfileInputs::mapper_weights),
// proxy_score stops at the mapper's input features.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "backend/cuda/gpu_mapper.hpp"
#include "backend/cuda/gpu_model.hpp"
#include "backend/cuda/gpu_predictors.hpp"
#include "backend/cuda/timing.hpp"
#include "backend/profiler.hpp"
#include "cost_model/input_error.hpp"
#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::backend {
namespace {

using kernels::DType;
using kernels::TensorView;
namespace kc = kernels::cuda;

constexpr int kSinkTokens = 4;
constexpr int kRecentWindow = 32;

void check_positive(const std::vector<std::int64_t>& list, const char* name) {
  for (std::int64_t v : list) {
    if (v < 1)
      throw InputError(std::string(name) + ": every entry must be >= 1 (got " + std::to_string(v) +
                       ")");
  }
}

void check_request(const ProfileRequest& req) {
  check_positive(req.tokens, "tokens");
  check_positive(req.sharing, "sharing");
  check_positive(req.decode_batches, "decode_batches");
  check_positive(req.decode_contexts, "decode_contexts");
  if (!(req.retention > 0 && req.retention <= 1)) throw InputError("retention: must be in (0, 1]");
}

std::int64_t largest(const std::vector<std::int64_t>& list) {
  return list.empty() ? 0 : *std::max_element(list.begin(), list.end());
}

kc::DeviceBuffer random_device(DType dtype, std::int64_t count, float bound, std::uint64_t seed,
                               CUstream_st* stream) {
  kc::DeviceBuffer b(static_cast<std::size_t>(count) * kernels::dtype_size(dtype));
  kc::fill_uniform({b.view(dtype, {count}), seed, -bound, bound}, stream);
  return b;
}

/// Device state of one reconstruct(T, N) measurement (the predictors are the run's). Every row
/// is rebuilt, sink rows too (GroupPredictor::sink_rows): at most sink_rows/T more work than a
/// move does.
struct ReconstructSetup {
  kc::DeviceBuffer cache, x, z;
  std::unique_ptr<kc::ReconstructGraph> run;
};

std::unique_ptr<ReconstructSetup> make_reconstruct(const ProfileRequest& req,
                                                   const std::vector<gpu::DevicePredictor>& preds,
                                                   std::int64_t tokens, std::int64_t sharing,
                                                   const kc::Context& ctx) {
  const cost_model::ModelSpec& m = req.model;
  auto s = std::make_unique<ReconstructSetup>();
  const TensorView cache_shape =
      kernels::make_view(nullptr, DType::kBF16, kernels::Device::kCuda,
                         {sharing, m.layers, 2, tokens, m.kv_heads, m.head_dim});
  s->cache = random_device(DType::kBF16, cache_shape.numel(), 1.0f, req.seed + 17, ctx.stream());
  TensorView cache = cache_shape;
  cache.data = s->cache.data();
  std::size_t most_anchors = 0, most_targets = 0;
  for (const auto& p : preds) {
    most_anchors = std::max(most_anchors, p.anchor_layers.size());
    most_targets = std::max(most_targets, p.target_layers.size());
  }
  const DType wtype = gpu::kernel_dtype(req.predictor_dtype);
  const auto shapes = kernels::reconstruct_shapes(cache, static_cast<int>(most_anchors),
                                                  static_cast<int>(most_targets));
  s->x = kc::DeviceBuffer(static_cast<std::size_t>(shapes.rows * shapes.x_cols) *
                          kernels::dtype_size(wtype));
  // A bf16 predictor writes its GEMM output in bf16: the cache is bf16 anyway, and the
  // epilogue then reads half the bytes.
  const DType ztype = wtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  s->z = kc::DeviceBuffer(static_cast<std::size_t>(shapes.rows * shapes.z_cols) *
                          kernels::dtype_size(ztype));
  std::vector<kernels::ReconstructDesc> descs;
  const std::int64_t w = m.kv_width();
  for (const auto& p : preds) {
    const auto a = static_cast<std::int64_t>(p.anchor_layers.size()) * w;
    const auto t = static_cast<std::int64_t>(p.target_layers.size()) * w;
    kernels::ReconstructDesc d;
    d.cache = cache;
    d.anchor_layers = p.anchor_layers;
    d.target_layers = p.target_layers;
    d.weight = p.weight.view(wtype, {a, t});
    d.bias = p.bias.view(DType::kF32, {t});
    d.x_workspace = s->x.view(wtype, {shapes.rows, a});
    d.z_workspace = s->z.view(ztype, {shapes.rows, t});
    d.theta = m.rope_theta;
    descs.push_back(std::move(d));
  }
  s->run = std::make_unique<kc::ReconstructGraph>(std::move(descs), ctx,
                                                  shapes.rows <= kc::kGraphRowLimit);
  return s;
}

std::int64_t keep_count(std::int64_t tokens, double retention) {
  const auto wanted =
      static_cast<std::int64_t>(std::llround(retention * static_cast<double>(tokens)));
  const std::int64_t forced = std::min<std::int64_t>(tokens, kSinkTokens + kRecentWindow);
  return std::min(tokens, std::max(wanted, forced));
}

/// InputError unless the mapper reads the proxy's layers·q_heads and scores the target's
/// layers·kv_heads (the CPU backend's check_mapper_fits, which this library cannot call).
void check_mapper_fits(const MapperConfig& c, const cost_model::ModelSpec& proxy,
                       const cost_model::ModelSpec& target) {
  const int in = proxy.layers * proxy.q_heads, out = target.layers * target.kv_heads;
  if (c.in_channels == in && c.targets == out) return;
  throw InputError("the ProxyKV mapper: built for " + std::to_string(c.in_channels) + " x " +
                   std::to_string(c.targets) + ", this proxy/target pair has " +
                   std::to_string(in) + " x " + std::to_string(out) +
                   " (proxy layers·heads x target layers·KV heads)");
}

/// The real weights when given, else seeded random ones of `spec`.
std::unique_ptr<gpu::GpuModel> make_model(const ModelWeights* real,
                                          const cost_model::ModelSpec& spec, std::uint64_t seed,
                                          gpu::GpuModelSize size, const kc::Context& ctx) {
  if (real) return std::make_unique<gpu::GpuModel>(*real, size, ctx);
  return std::make_unique<gpu::GpuModel>(spec, seed, size, ctx);
}

class CudaProfiler final : public Profiler {
 public:
  CudaProfiler() : ctx_(stream_.get()), proxy_ctx_(proxy_stream_.get()) {}

  std::string backend_name() const override { return "cuda"; }

  std::map<std::string, std::string> notes() const override {
    return {{"proxy_score",
             "without a trained mapper: the proxy's prefill and the mapper's input "
             "features only"},
            {"decode",
             "attention is not split over the key axis: an upper bound at small "
             "batches and long contexts"}};
  }

  std::string device_description() const override {
    int device = 0, driver = 0, runtime = 0;
    cudaDeviceProp p{};
    KVSHIFT_CUDA_CHECK(cudaGetDevice(&device));
    KVSHIFT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    KVSHIFT_CUDA_CHECK(cudaDriverGetVersion(&driver));
    KVSHIFT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    const auto version = [](int v) {
      return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    };
    return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) +
           ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
           std::to_string(p.totalGlobalMem >> 30) + " GiB), driver " + version(driver) +
           ", runtime " + version(runtime);
  }

  std::vector<OpTiming> run(const ProfileRequest& req) override {
    check_request(req);
    const bool decode =
        req.wants("decode") && !req.decode_batches.empty() && !req.decode_contexts.empty();
    const bool prefill = req.wants("prefill") && !req.tokens.empty();
    const bool reconstruct = req.wants("reconstruct") && !req.omission.empty();
    const bool proxy_score = req.wants("proxy_score") && req.proxy.has_value();
    const std::int64_t max_t = std::max<std::int64_t>(1, largest(req.tokens));
    std::unique_ptr<gpu::GpuModel> target, proxy;
    if (prefill || decode) {
      const gpu::GpuModelSize size{prefill ? max_t : 1, decode ? largest(req.decode_batches) : 0};
      target = make_model(req.inputs.target.get(), req.model, req.seed, size, ctx_);
    }
    std::unique_ptr<gpu::GpuMapper> mapper;
    kc::DeviceBuffer features;  // the mapper's input [proxy layers·q_heads, T] f32
    if (proxy_score) {
      proxy = make_model(req.inputs.proxy.get(), *req.proxy, req.seed + 1, {max_t, 0}, proxy_ctx_);
      if (req.inputs.mapper_weights) {
        check_mapper_fits(req.inputs.mapper_weights->config, *req.proxy, req.model);
        if (req.inputs.mapper_weights->config.features != MapperFeatures::kLogMeanAttention) {
          throw InputError(std::string("the ProxyKV mapper: trained on ") +
                           features_name(req.inputs.mapper_weights->config.features) +
                           " features; the CUDA profiler computes log_mean_attention only "
                           "(time this mapper with --backend cpu)");
        }
        mapper = std::make_unique<gpu::GpuMapper>(*req.inputs.mapper_weights, max_t, proxy_ctx_);
      }
      features = kc::DeviceBuffer(static_cast<std::size_t>(req.proxy->layers) * req.proxy->q_heads *
                                  max_t * sizeof(float));
    }
    std::vector<gpu::DevicePredictor> preds;
    if (reconstruct) preds = gpu::device_predictors(req, ctx_.stream());
    kc::device_synchronize();  // weights uploaded and filled before any timed launch

    std::vector<OpTiming> rows;
    for (const std::int64_t t : req.tokens) {
      if (prefill) {
        rows.push_back(gpu::time_on_stream("prefill", t, 1, req.warmup, req.repeats, ctx_.stream(),
                                           [&] { target->prefill(t, false); }));
      }
      if (reconstruct) {
        for (const std::int64_t n : req.sharing) {
          auto setup = make_reconstruct(req, preds, t, n, ctx_);
          rows.push_back(gpu::time_on_stream("reconstruct", t, n, req.warmup, req.repeats,
                                             ctx_.stream(), [&] { setup->run->launch(); }));
        }
      }
      if (proxy) rows.push_back(time_proxy_score(req, *proxy, mapper.get(), features, t));
      if (req.wants("prune")) rows.push_back(time_prune(req, t));
    }
    if (decode) {
      for (const std::int64_t b : req.decode_batches) {
        for (const std::int64_t c : req.decode_contexts)
          rows.push_back(time_decode(req, *target, b, c));
      }
    }
    if (req.inputs.predictors && !req.omission.empty() && req.wants("predictor_load"))
      rows.push_back(gpu::time_predictor_load(req, ctx_.stream()));
    return rows;
  }

 private:
  /// ProxyKV scoring on the proxy's stream: prefill with attention mass, log_mean_attention
  /// into `features`, then the mapper (when given) to scores that stay on the device.
  OpTiming time_proxy_score(const ProfileRequest& req, gpu::GpuModel& proxy, gpu::GpuMapper* mapper,
                            const kc::DeviceBuffer& features, std::int64_t t) {
    const std::int64_t rows = static_cast<std::int64_t>(req.proxy->layers) * req.proxy->q_heads;
    const TensorView x = features.view(DType::kF32, {rows, t});
    CUstream_st* s = proxy_ctx_.stream();
    return gpu::time_on_stream("proxy_score", t, 1, req.warmup, req.repeats, s, [&] {
      proxy.prefill(t, true);
      kc::log_mean_attention({proxy.features(t), x}, s);
      if (mapper) mapper->forward(x);
    });
  }

  /// Every timed step writes the same new slot, so each sees exactly c + 1 keys.
  OpTiming time_decode(const ProfileRequest& req, gpu::GpuModel& model, std::int64_t b,
                       std::int64_t c) {
    const gpu::DecodeCache cache(model.spec(), b, c, req.seed + 41, ctx_.stream());
    OpTiming row = gpu::time_on_stream("decode", c, 1, req.warmup, req.repeats, ctx_.stream(),
                                       [&] { model.decode_step(cache); });
    row.batch = b;
    return row;
  }

  OpTiming time_prune(const ProfileRequest& req, std::int64_t tokens) {
    const cost_model::ModelSpec& m = req.model;
    const std::int64_t heads = static_cast<std::int64_t>(m.layers) * m.kv_heads;
    const std::int64_t keep = keep_count(tokens, req.retention);
    CUstream_st* s = ctx_.stream();
    const std::int64_t per_layer = tokens * m.kv_heads * m.head_dim;
    kc::DeviceBuffer cache =
        random_device(DType::kBF16, m.layers * 2 * per_layer, 1.0f, req.seed + 31, s);
    kc::DeviceBuffer kept(static_cast<std::size_t>(m.layers) * 2 * keep * m.kv_heads * m.head_dim *
                          2);
    kc::DeviceBuffer scores = random_device(DType::kF32, heads * tokens, 1.0f, req.seed + 32, s);
    kc::DeviceBuffer indices(static_cast<std::size_t>(heads * keep) * 4);
    const TensorView all_idx = indices.view(DType::kI32, {heads, keep});
    const TensorView src =
        cache.view(DType::kBF16, {m.layers * 2LL * tokens, m.kv_heads, m.head_dim});
    const TensorView dst = kept.view(DType::kBF16, {m.layers * 2LL * keep, m.kv_heads, m.head_dim});
    return gpu::time_on_stream("prune", tokens, 1, req.warmup, req.repeats, s, [&] {
      kc::top_k({scores.view(DType::kF32, {heads, tokens}), all_idx, kSinkTokens, kRecentWindow},
                s);
      for (int l = 0; l < m.layers; ++l) {
        const TensorView idx =
            kernels::slice(all_idx, 0, static_cast<std::int64_t>(l) * m.kv_heads, m.kv_heads);
        for (int kv = 0; kv < 2; ++kv) {
          const std::int64_t slot = 2LL * l + kv;
          kc::kv_gather({kernels::slice(src, 0, slot * tokens, tokens), idx,
                         kernels::slice(dst, 0, slot * keep, keep)},
                        s);
        }
      }
    });
  }

  kc::Stream stream_, proxy_stream_;
  kc::Context ctx_, proxy_ctx_;
};

}  // namespace

std::unique_ptr<Profiler> make_cuda_profiler() {
  const std::string reason = kc::device_unavailable_reason();
  if (!reason.empty()) throw std::runtime_error("CUDA backend: " + reason);
  return std::make_unique<CudaProfiler>();
}

}  // namespace kvshift::backend
