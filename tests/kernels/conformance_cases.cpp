// The list of op cases: fresh random inputs at sizes that are not multiples of any tile, every
// dtype the CPU twins run, and each op's known edges — RMSNorm into a narrower dtype, RoPE at
// position 31000 both ways, attention at head_dim 64 and 128 with its log-sum-exp on all three
// CUDA kernels (and the prefill kernel up to 3001 tokens at GQA ratios 1, 4 and 7), top-K with ties
// and with keep-all and keep-none, the GEMM with and without beta, LayerNorm in place, a
// reconstruction that must overwrite NaN target layers, and two reconstruction groups replayed from
// a CUDA Graph (conformance_cases_reconstruct.cpp). Inputs an op needs from another (lse, top-K
// indices) are made by the CPU twins.
#include "conformance_cases.hpp"

#include "conformance_case_tensors.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "kernels/cpu.hpp"

namespace kvshift::kernels::testing {
namespace {

using namespace case_tensors;

void add_elementwise(std::vector<OpCase>& cases) {
  for (const auto& [x, out] :
       {std::pair{kF32, kF32}, {kF32, kBF16}, {kBF16, kBF16}, {kF16, kF16}}) {
    cases.push_back({name_of(Op::kRmsNorm, x, "to_" + tag(out)), Op::kRmsNorm, x,
                     [x, out](Rng& rng) {
                       return Tensors{random(rng, "x", x, {37, 1000}),
                                      random(rng, "weight", x, {1000}),
                                      blank("out", out, {37, 1000})};
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return RmsNormDesc{v[0], v[1], v[2], 1e-6f};
                     }});
  }
  for (const auto& [t, inverse] :
       {std::pair{kF32, false}, {kF32, true}, {kBF16, false}, {kBF16, true}, {kF16, false}}) {
    cases.push_back(
        {name_of(Op::kRope, t, inverse ? "invert" : "apply"), Op::kRope, t,
         [t](Rng& rng) {
           return Tensors{random(rng, "x", t, {45, 3, 64}), blank("out", t, {45, 3, 64})};
         },
         [inverse](const Views& v, std::uint64_t) -> Call {
           return RopeDesc{v[0], v[1], 1e6, 31000, inverse};
         }});
  }
  // z columns: Q (3 heads) | K (1 head) | V (1 head), head_dim 64, 2 requests x 33 tokens.
  for (const auto& [z, dst] : {std::pair{kF32, kF32}, {kF32, kBF16}, {kBF16, kBF16}}) {
    cases.push_back(
        {name_of(Op::kBiasRopeScatter, z, "to_" + tag(dst)), Op::kBiasRopeScatter, z,
         [z, dst](Rng& rng) {
           return Tensors{random(rng, "z", z, {66, 320}), random(rng, "bias", kF32, {320}),
                          blank("q", dst, {2, 33, 3, 64}), blank("k", dst, {2, 33, 1, 64}),
                          blank("v", dst, {2, 33, 1, 64})};
         },
         [](const Views& v, std::uint64_t) -> Call {
           return EpilogueDesc{
               v[0], v[1], {{0, true, v[2]}, {192, true, v[3]}, {256, false, v[4]}}, 1e4, 7};
         }});
  }
  for (const DType t : {kF32, kBF16, kF16}) {
    cases.push_back({name_of(Op::kSwiglu, t), Op::kSwiglu, t,
                     [t](Rng& rng) {
                       return Tensors{random(rng, "gate", t, {19, 777}),
                                      random(rng, "up", t, {19, 777}), blank("out", t, {19, 777})};
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return SwigluDesc{v[0], v[1], v[2]};
                     }});
    cases.push_back({name_of(Op::kEmbed, t), Op::kEmbed, t,
                     [t](Rng& rng) {
                       Tensors ts{random(rng, "table", t, {50, 100}),
                                  blank("ids", DType::kI32, {17}, Role::kIn),
                                  blank("out", kF32, {17, 100})};
                       std::uniform_int_distribution<int> pick(0, 49);
                       for (int i = 0; i < 17; ++i) ts[1].host.seti(i, pick(rng));
                       return ts;
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return EmbedDesc{v[0], v[1], v[2]};
                     }});
    cases.push_back({name_of(Op::kFillUniform, t), Op::kFillUniform, t,
                     [t](Rng&) { return Tensors{blank("out", t, {10001})}; },
                     [](const Views& v, std::uint64_t seed) -> Call {
                       return FillDesc{v[0], seed, -0.25f, 0.75f};
                     }});
  }
}

struct AttentionShape {
  DType dtype;
  std::int64_t tq, tk, hq, hkv, hd;
  std::string what() const {
    return "q" + std::to_string(tq) + "_k" + std::to_string(tk) + "_hd" + std::to_string(hd);
  }
};

/// q, k and the log-sum-exp the attention op gives them (attention_mass's inputs).
Tensors mass_inputs(Rng& rng, const AttentionShape& s) {
  Tensors ts{random(rng, "q", s.dtype, {s.tq, s.hq, s.hd}),
             random(rng, "k", s.dtype, {s.tk, s.hkv, s.hd}),
             blank("lse", kF32, {s.tq, s.hq}, Role::kIn), blank("out", kF32, {s.hq, s.tk})};
  const HostTensor v = random(rng, "v", s.dtype, {s.tk, s.hkv, s.hd}).host;
  HostTensor out(s.dtype, {s.tq, s.hq, s.hd});
  cpu::attention({ts[0].host.view(), ts[1].host.view(), v.view(), out.view(), ts[2].host.view()});
  return ts;
}

/// Which CUDA kernel a case runs: cuda::attention's choice, or the SIMT or WMMA kernel forced.
enum class Path : std::uint8_t { kDefault, kSimt, kWmma };

void add_attention_case(std::vector<OpCase>& cases, const AttentionShape& s, Path path) {
  const char* suffix = path == Path::kSimt ? "_simt" : path == Path::kWmma ? "_wmma" : "";
  cases.push_back({name_of(Op::kAttention, s.dtype, s.what() + suffix), Op::kAttention, s.dtype,
                   [s](Rng& rng) {
                     return Tensors{random(rng, "q", s.dtype, {s.tq, s.hq, s.hd}),
                                    random(rng, "k", s.dtype, {s.tk, s.hkv, s.hd}),
                                    random(rng, "v", s.dtype, {s.tk, s.hkv, s.hd}),
                                    blank("out", s.dtype, {s.tq, s.hq, s.hd}),
                                    blank("lse", kF32, {s.tq, s.hq})};
                   },
                   [path](const Views& v, std::uint64_t) -> Call {
                     const AttentionDesc d{v[0], v[1], v[2], v[3], v[4], 0};
                     if (path == Path::kSimt) return SimtAttention{d};
                     if (path == Path::kWmma) return WmmaAttention{d};
                     return d;
                   }});
}

/// The prefill kernel's shapes (bf16, no mask: attention_fa2.cu on CUDA): token counts that are
/// not multiples of its 64-query and 64-key tiles, up to a few thousand, GQA ratios 1, 4 and 7,
/// head_dim 64 and 128, queries that continue a longer context (tk > tq), a single query and a
/// single token. Names end in _gqa<ratio>.
void add_prefill_attention(std::vector<OpCase>& cases) {
  const AttentionShape shapes[] = {{kBF16, 1, 1, 4, 4, 64},        {kBF16, 1, 777, 8, 2, 128},
                                   {kBF16, 65, 65, 7, 1, 128},     {kBF16, 100, 1100, 14, 2, 64},
                                   {kBF16, 1537, 1537, 4, 4, 128}, {kBF16, 2049, 2049, 8, 2, 64},
                                   {kBF16, 3001, 3001, 7, 1, 64},  {kBF16, 1999, 2500, 7, 1, 128}};
  for (const AttentionShape& s : shapes) {
    const std::string ratio = "_gqa" + std::to_string(s.hq / s.hkv);
    const std::size_t before = cases.size();
    add_attention_case(cases, s, Path::kDefault);
    cases[before].name += ratio;
  }
}

void add_attention(std::vector<OpCase>& cases) {
  add_prefill_attention(cases);
  const AttentionShape shapes[] = {{kF32, 77, 77, 6, 2, 64},       {kF32, 13, 100, 4, 4, 128},
                                   {kBF16, 301, 301, 14, 2, 64},   {kBF16, 50, 333, 12, 2, 128},
                                   {kBF16, 1000, 1000, 4, 1, 128}, {kF16, 29, 70, 4, 2, 64}};
  for (const AttentionShape& s : shapes) {
    for (const Path path : {Path::kDefault, Path::kSimt, Path::kWmma}) {
      if (path == Path::kWmma && s.dtype != kBF16) continue;
      add_attention_case(cases, s, path);
    }
    // A budget that differs per head: each KV head drops its own keys (a quarter of them on
    // head 0, more on later heads), like pruning's global top-K; key 0 (a sink) is kept, so
    // every query sees a key (attention_ref_test covers a query that sees none).
    if (s.tq >= 29) {
      cases.push_back({name_of(Op::kAttention, s.dtype, s.what() + "_masked"), Op::kAttention,
                       s.dtype,
                       [s](Rng& rng) {
                         Tensors ts{random(rng, "q", s.dtype, {s.tq, s.hq, s.hd}),
                                    random(rng, "k", s.dtype, {s.tk, s.hkv, s.hd}),
                                    random(rng, "v", s.dtype, {s.tk, s.hkv, s.hd}),
                                    blank("out", s.dtype, {s.tq, s.hq, s.hd}),
                                    blank("lse", kF32, {s.tq, s.hq}),
                                    blank("key_mask", DType::kI32, {s.tk, s.hkv}, Role::kIn)};
                         std::uniform_real_distribution<double> u(0, 1);
                         for (std::int64_t j = 0; j < s.tk; ++j) {
                           for (std::int64_t h = 0; h < s.hkv; ++h) {
                             const double keep = 0.75 - 0.5 * double(h) / double(s.hkv);
                             const bool kept = j == 0 || u(rng) < keep;
                             ts[5].host.seti(j * s.hkv + h, kept ? 1 : 0);
                           }
                         }
                         return ts;
                       },
                       [](const Views& v, std::uint64_t) -> Call {
                         return AttentionDesc{v[0], v[1], v[2], v[3], v[4], 0, v[5]};
                       }});
    }
    const std::int64_t begin = s.tq / 3;
    cases.push_back({name_of(Op::kAttentionMass, s.dtype, s.what() + "_sum"), Op::kAttentionMass,
                     s.dtype, [s](Rng& rng) { return mass_inputs(rng, s); },
                     [begin](const Views& v, std::uint64_t) -> Call {
                       return AttentionMassDesc{v[0], v[1], v[2], v[3], 0, begin};
                     }});
  }
  // KVZip's max weight per key, with only the queries from `begin` on voting (SnapKV's window).
  const std::pair<AttentionShape, std::int64_t> max_cases[] = {
      {shapes[0], 0}, {shapes[1], 5}, {shapes[2], 0}, {shapes[3], 17}};
  for (const auto& [s, begin] : max_cases) {
    OpCase c{name_of(Op::kAttentionMass, s.dtype, s.what() + "_max_from" + std::to_string(begin)),
             Op::kAttentionMass, s.dtype, [s](Rng& rng) { return mass_inputs(rng, s); },
             [begin](const Views& v, std::uint64_t) -> Call {
               return AttentionMassDesc{v[0], v[1], v[2], v[3], 0, begin, Reduce::kMax};
             }};
    c.bound_by_inputs = true;
    cases.push_back(std::move(c));
  }
}

void add_scoring(std::vector<OpCase>& cases) {
  for (const Reduce how : {Reduce::kSum, Reduce::kMax}) {
    OpCase c{name_of(Op::kGroupReduce, kF32, how == Reduce::kSum ? "sum" : "max"), Op::kGroupReduce,
             kF32,
             [](Rng& rng) {
               return Tensors{random(rng, "in", kF32, {3 * 14, 1001}),
                              blank("out", kF32, {3 * 2, 1001})};
             },
             [how](const Views& v, std::uint64_t) -> Call {
               return GroupReduceDesc{v[0], v[1], how};
             }};
    c.exact = true;
    cases.push_back(std::move(c));
  }
  for (const int kernel : {1, 7, 31}) {
    cases.push_back(
        {name_of(Op::kAvgPool, kF32, "kernel" + std::to_string(kernel)), Op::kAvgPool, kF32,
         [](Rng& rng) {
           return Tensors{random(rng, "in", kF32, {5, 333}), blank("out", kF32, {5, 333})};
         },
         [kernel](const Views& v, std::uint64_t) -> Call {
           return AvgPoolDesc{v[0], v[1], kernel};
         }});
  }
  cases.push_back({name_of(Op::kLogMeanAttention, kF32), Op::kLogMeanAttention, kF32,
                   [](Rng& rng) {
                     Tensors ts{random(rng, "mass", kF32, {9, 517}), blank("out", kF32, {9, 517})};
                     HostTensor& mass = ts[0].host;
                     for (std::int64_t i = 0; i < mass.numel(); ++i) {
                       mass.set(i, std::abs(mass.get(i)) * 20);
                     }
                     mass.set(3, 0);  // a key nobody attends to
                     return ts;
                   },
                   [](const Views& v, std::uint64_t) -> Call {
                     return LogMeanAttentionDesc{v[0], v[1]};
                   }});
}

void add_mapper(std::vector<OpCase>& cases) {
  for (const int kernel : {1, 3, 7}) {
    cases.push_back({name_of(Op::kIm2Col, kF32, "kernel" + std::to_string(kernel)), Op::kIm2Col,
                     kF32,
                     [kernel](Rng& rng) {
                       return Tensors{random(rng, "x", kF32, {37, 301}),
                                      blank("cols", kF32, {301, 37 * kernel})};
                     },
                     [kernel](const Views& v, std::uint64_t) -> Call {
                       return Im2ColDesc{v[0], v[1], kernel};
                     }});
  }
  using Act = BiasActDesc::Act;
  for (const auto& [act, positions] :
       {std::pair{Act::kNone, false}, {Act::kGelu, false}, {Act::kGelu, true}}) {
    const std::string what =
        std::string(act == Act::kGelu ? "gelu" : "none") + (positions ? "_positions" : "");
    cases.push_back(
        {name_of(Op::kBiasAct, kF32, what), Op::kBiasAct, kF32,
         [](Rng& rng) {
           Tensors ts{random(rng, "x", kF32, {1000, 66}), random(rng, "bias", kF32, {66})};
           ts[0].role = Role::kInOut;
           return ts;
         },
         [act, positions](const Views& v, std::uint64_t) -> Call {
           return BiasActDesc{v[0], v[1], act, positions};
         }});
  }
  for (const std::int64_t dim : {64, 100, 257}) {
    for (const bool in_place : {false, true}) {
      cases.push_back({name_of(Op::kLayerNorm, kF32,
                               "dim" + std::to_string(dim) + (in_place ? "_in_place" : "")),
                       Op::kLayerNorm, kF32,
                       [dim, in_place](Rng& rng) {
                         Tensors ts{random(rng, "x", kF32, {77, dim}, 3),
                                    random(rng, "weight", kF32, {dim}),
                                    random(rng, "bias", kF32, {dim})};
                         if (in_place) {
                           ts[0].role = Role::kInOut;
                         } else {
                           ts.push_back(blank("out", kF32, {77, dim}));
                         }
                         return ts;
                       },
                       [in_place](const Views& v, std::uint64_t) -> Call {
                         return LayerNormDesc{v[0], v[1], v[2], in_place ? v[0] : v[3]};
                       }});
    }
  }
  struct Window {
    std::int64_t tokens, heads, hd, radius;
  };
  for (const Window w : {Window{301, 4, 16, 64}, Window{77, 2, 48, 5}, Window{130, 3, 128, 0},
                         Window{40, 1, 200, 100}}) {
    cases.push_back({name_of(Op::kWindowAttention, kF32,
                             "t" + std::to_string(w.tokens) + "_hd" + std::to_string(w.hd) +
                                 "_radius" + std::to_string(w.radius)),
                     Op::kWindowAttention, kF32,
                     [w](Rng& rng) {
                       return Tensors{random(rng, "q", kF32, {w.tokens, w.heads, w.hd}, 0.5f),
                                      random(rng, "k", kF32, {w.tokens, w.heads, w.hd}, 0.5f),
                                      random(rng, "v", kF32, {w.tokens, w.heads, w.hd}),
                                      blank("out", kF32, {w.tokens, w.heads, w.hd})};
                     },
                     [w](const Views& v, std::uint64_t) -> Call {
                       return WindowAttentionDesc{v[0], v[1], v[2], v[3], w.radius};
                     }});
  }
  cases.push_back({name_of(Op::kAxialHead, kF32), Op::kAxialHead, kF32,
                   [](Rng& rng) {
                     const std::int64_t sources = 270, targets = 58, tokens = 203;
                     return Tensors{random(rng, "x", kF32, {sources, tokens}),
                                    random(rng, "g", kF32, {targets, sources}),
                                    random(rng, "u", kF32, {targets}),
                                    random(rng, "vb", kF32, {sources}),
                                    random(rng, "time_terms", kF32, {tokens, sources + 2}),
                                    blank("y", kF32, {targets, tokens})};
                   },
                   [](const Views& v, std::uint64_t) -> Call {
                     return AxialHeadDesc{v[0], v[1], v[2], v[3], v[4], v[5], 0.7f, 0.1f, 0.125f};
                   }});
}

void add_select(std::vector<OpCase>& cases) {
  for (const bool ties : {false, true}) {
    cases.push_back({name_of(Op::kTopK, kF32, ties ? "ties" : "distinct"), Op::kTopK, kF32,
                     [ties](Rng& rng) {
                       Tensors ts{random(rng, "scores", kF32, {5, 1003}),
                                  blank("indices", DType::kI32, {5, 123})};
                       if (ties) {  // only 7 distinct values: most of the cut falls on ties
                         HostTensor& s = ts[0].host;
                         for (std::int64_t i = 0; i < s.numel(); ++i) {
                           s.set(i, std::round(s.get(i) * 2));
                         }
                       }
                       return ts;
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return TopKDesc{v[0], v[1], 4, 16};
                     }});
  }
  for (const std::int64_t keep : {77, 0}) {
    cases.push_back({name_of(Op::kTopK, kF32, keep == 0 ? "keep_none" : "keep_all"), Op::kTopK,
                     kF32,
                     [keep](Rng& rng) {
                       return Tensors{random(rng, "scores", kF32, {2, 77}),
                                      blank("indices", DType::kI32, {2, keep})};
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return TopKDesc{v[0], v[1], 0, 0};
                     }});
  }
  for (const DType t : {kF32, kBF16, kF16}) {
    cases.push_back({name_of(Op::kKvGather, t), Op::kKvGather, t,
                     [t](Rng& rng) {
                       Tensors ts{random(rng, "src", t, {100, 3, 64}),
                                  blank("indices", DType::kI32, {3, 37}, Role::kIn),
                                  blank("dst", t, {37, 3, 64})};
                       const HostTensor scores = random(rng, "scores", kF32, {3, 100}).host;
                       cpu::top_k({scores.view(), ts[1].host.view(), 2, 5});
                       return ts;
                     },
                     [](const Views& v, std::uint64_t) -> Call {
                       return GatherDesc{v[0], v[1], v[2]};
                     }});
  }
  struct Gemm {
    DType in, out;
    bool transposed;
    float beta;
  };
  for (const Gemm g :
       {Gemm{kF32, kF32, true, 0}, Gemm{kF32, kF32, false, 1}, Gemm{kBF16, kF32, true, 1},
        Gemm{kBF16, kBF16, false, 0}, Gemm{kF16, kF16, true, 0}, Gemm{kF16, kF32, false, 1}}) {
    const std::int64_t m = 33, k = 70, n = 45;
    cases.push_back(
        {name_of(Op::kGemm, g.in,
                 "to_" + tag(g.out) + (g.transposed ? "_bt" : "_b") + (g.beta != 0 ? "_beta" : "")),
         Op::kGemm, g.in,
         [g](Rng& rng) {
           Tensors ts{random(rng, "a", g.in, {m, k}),
                      random(rng, "b", g.in, {g.transposed ? n : k, g.transposed ? k : n}),
                      random(rng, "c", g.out, {m, n})};
           // beta 0 must not read c: it starts poisoned then.
           ts[2].role = g.beta != 0 ? Role::kInOut : Role::kOut;
           return ts;
         },
         [g](const Views& v, std::uint64_t) -> Call {
           return GemmDesc{v[0], v[1], v[2], g.transposed, 1.5f, g.beta};
         }});
  }
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    add_elementwise(all);
    add_attention(all);
    add_scoring(all);
    add_mapper(all);
    add_select(all);
    add_reconstruct(all);
    return all;
  }();
  return cases;
}

}  // namespace kvshift::kernels::testing
