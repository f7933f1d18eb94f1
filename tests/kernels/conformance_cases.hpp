// The conformance test's op cases, in the manner of ggml's test-backend-ops: each names an op
// and a dtype (kernels/backends.hpp), makes its tensors from a seeded generator, and builds the
// call a backend runs on its own copies of them. The harness (conformance_test.cpp) runs every
// case on every compiled backend; op_cases() holds one case per (op, dtype) the CPU twins support
// at least, plus the shapes and parameters a kernel is known to be sensitive to.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "host_tensor.hpp"
#include "kernels/backends.hpp"
#include "kernels/ops.hpp"

namespace kvshift::kernels::testing {

/// What a run does with a case tensor.
enum class Role : std::uint8_t {
  kIn,       ///< read only
  kOut,      ///< NaN-poisoned before the run, checked after
  kInOut,    ///< updated in place, checked after
  kScratch,  ///< a workspace: NaN-poisoned; its results reach the outputs, so CUDA skips it
};

/// One tensor of a case, in the order the call's descriptor takes it.
struct CaseTensor {
  std::string name;
  Role role;
  HostTensor host;
};

/// CUDA's SIMT attention kernel (cuda::attention takes the tensor cores for aligned bf16); the
/// CPU runs its one attention.
struct SimtAttention {
  AttentionDesc desc;
};

/// CUDA's first tensor-core kernel (WMMA), kept as a baseline; the CPU runs its one attention.
struct WmmaAttention {
  AttentionDesc desc;
};

/// Reconstruction groups launched twice (idempotent: anchors are never targets), on CUDA
/// through a ReconstructGraph with or without graph capture.
struct ReconstructGroups {
  std::vector<ReconstructDesc> groups;
  bool use_graph = false;
};

/// One call as a backend runs it.
using Call =
    std::variant<RmsNormDesc, RopeDesc, EpilogueDesc, SwigluDesc, AttentionDesc, SimtAttention,
                 WmmaAttention, AttentionMassDesc, GroupReduceDesc, AvgPoolDesc,
                 LogMeanAttentionDesc, Im2ColDesc, BiasActDesc, LayerNormDesc, WindowAttentionDesc,
                 AxialHeadDesc, TopKDesc, GatherDesc, GemmDesc, EmbedDesc, FillDesc,
                 AnchorGatherDesc, ReconstructDesc, ReconstructGroups>;

struct OpCase {
  std::string name;  ///< the test's name: op, dtype and what varies
  Op op;
  DType dtype;  ///< of the first tensor
  std::function<std::vector<CaseTensor>(std::mt19937_64& rng)> make;
  /// The call on one backend's views of the tensors (make's order); `seed` for ops that take one.
  std::function<Call(const std::vector<TensorView>& v, std::uint64_t seed)> call;
  bool exact = false;  ///< outputs must match the twin bit for bit (i32 outputs always do)
  /// The error bound follows the case's dtype, not each output's (bf16 scores round before an exp).
  bool bound_by_inputs = false;
};

/// Every case, built once.
const std::vector<OpCase>& op_cases();

/// How GoogleTest prints a case: by its name.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

}  // namespace kvshift::kernels::testing
