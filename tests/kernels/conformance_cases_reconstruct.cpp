// Reconstruction cases (see conformance_cases.cpp): a KV cache of 3 requests whose target layers
// the predictors rebuild.
#include <cmath>

#include "conformance_case_tensors.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::kernels::testing {
namespace {

using namespace case_tensors;

// A KV cache of 3 requests, 8 layers, 21 tokens, 2 KV heads of 64: w = 256 values per token
// and layer, anchors {0, 1, 4, 5} (or {0, 1, 6, 7}) predicting two layers each group.
constexpr std::int64_t kReq = 3, kLayers = 8, kTokens = 21, kHeads = 2, kHd = 64;
constexpr std::int64_t kW = 2 * kHeads * kHd, kRows = kReq * kTokens;

CaseTensor random_cache(Rng& rng, DType t) {
  CaseTensor c = random(rng, "cache", t, {kReq, kLayers, 2, kTokens, kHeads, kHd});
  c.role = Role::kInOut;
  return c;
}

/// NaN in every K and V of `layers`: a reconstruction of them must overwrite all.
void poison_layers(HostTensor& cache, const std::vector<int>& layers) {
  for (const int layer : layers) {
    for (int kv = 0; kv < 2; ++kv) {
      const TensorView l = cache_layer(cache.view(), layer, kv);
      for (std::int64_t r = 0; r < kReq; ++r)
        for (std::int64_t t = 0; t < kTokens; ++t)
          for (std::int64_t h = 0; h < kHeads; ++h)
            for (std::int64_t e = 0; e < kHd; ++e) store_float(l, l.offset({r, t, h, e}), NAN);
    }
  }
}

/// A group's predictor: weight [anchors * w, 2 * w] and bias [2 * w].
void add_predictor(Rng& rng, Tensors& ts, DType t) {
  ts.push_back(random(rng, "weight", t, {4 * kW, 2 * kW}, 0.05f));
  ts.push_back(random(rng, "bias", kF32, {2 * kW}));
}

}  // namespace

void add_reconstruct(std::vector<OpCase>& cases) {
  for (const auto& [cache, x] :
       {std::pair{kBF16, kF32}, {kBF16, kBF16}, {kF32, kF32}, {kF16, kF16}}) {
    cases.push_back({name_of(Op::kAnchorGather, cache, "to_" + tag(x)), Op::kAnchorGather, cache,
                     [cache, x](Rng& rng) {
                       return Tensors{
                           random(rng, "cache", cache, {kReq, kLayers, 2, kTokens, kHeads, kHd}),
                           blank("x", x, {kRows, 4 * kW})};
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return AnchorGatherDesc{v[0], {0, 1, 4, 5}, v[1], 1e6, 5};
                     }});
  }
  // The cache in the predictor's dtype, with NaN target layers to overwrite.
  for (const DType t : {kF32, kBF16, kF16}) {
    cases.push_back(
        {name_of(Op::kReconstruct, t, "predictor_" + tag(t)), Op::kReconstruct, t,
         [t](Rng& rng) {
           Tensors ts{random_cache(rng, t)};
           poison_layers(ts[0].host, {2, 3});
           add_predictor(rng, ts, t);
           ts.push_back(blank("x", t, {kRows, 4 * kW}, Role::kScratch));
           ts.push_back(blank("z", kF32, {kRows, 2 * kW}, Role::kScratch));
           return ts;
         },
         [](const Views& v, std::uint64_t) -> Call {
           return ReconstructDesc{v[0], {0, 1, 4, 5}, {2, 3}, v[1], v[2], v[3], v[4], 1e6, 5};
         }});
  }
  // Two groups of one topology, launched plainly and replayed from a CUDA Graph; a bf16
  // predictor writes its GEMM output in bf16 here (the CUDA profiler's setting).
  for (const DType predictor : {kF32, kBF16}) {
    for (const bool use_graph : {false, true}) {
      cases.push_back(
          {name_of(Op::kReconstruct, kBF16,
                   "predictor_" + tag(predictor) + (use_graph ? "_graph" : "_launches")),
           Op::kReconstruct, kBF16,
           [predictor](Rng& rng) {
             Tensors ts{random_cache(rng, kBF16)};
             add_predictor(rng, ts, predictor);
             add_predictor(rng, ts, predictor);
             ts.push_back(blank("x", predictor, {kRows, 4 * kW}, Role::kScratch));
             ts.push_back(blank("z", predictor, {kRows, 2 * kW}, Role::kScratch));
             return ts;
           },
           [use_graph](const Views& v, std::uint64_t) -> Call {
             const std::vector<int> anchors{0, 1, 6, 7};
             return ReconstructGroups{{{v[0], anchors, {2, 3}, v[1], v[2], v[5], v[6], 1e6, 5},
                                       {v[0], anchors, {4, 5}, v[3], v[4], v[5], v[6], 1e6, 5}},
                                      use_graph};
           }});
    }
  }
}

}  // namespace kvshift::kernels::testing
