// A small Llama-shaped model spec (GQA, SwiGLU) for backend tests that need real
// shapes and seeded random weights, not a checkpoint.
#pragma once

#include <string>

#include "cost_model/model_spec.hpp"

namespace kvshift::testing {

struct TinyShape {
  int layers = 8;
  int hidden = 32;
  int head_dim = 8;
  int intermediate = 48;
  int vocab = 64;
};

/// 4 query heads over 2 KV heads of `head_dim`, RoPE theta 10000.
inline cost_model::ModelSpec tiny_spec(const std::string& name, const TinyShape& s = {}) {
  cost_model::ModelSpec m;
  m.name = name;
  m.layers = s.layers;
  m.hidden = s.hidden;
  m.q_heads = 4;
  m.kv_heads = 2;
  m.head_dim = s.head_dim;
  m.intermediate = s.intermediate;
  m.vocab = s.vocab;
  m.rope_theta = 10000.0;
  return m;
}

}  // namespace kvshift::testing
