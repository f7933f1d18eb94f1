// prepare_mapper: the host-side stacking and folding of a mapper's weights that
// mapper_program.hpp describes, in fp32 Eigen (the CPU mapper's arithmetic).
#include "backend/cuda/mapper_program.hpp"

#include <stdexcept>
#include <string>

namespace kvshift::backend::gpu {
namespace {

template <typename M>
void check_shape(const std::string& name, const M& m, Eigen::Index rows, Eigen::Index cols) {
  if (m.rows() != rows || m.cols() != cols) {
    throw std::invalid_argument("mapper weights: " + name + " is [" + std::to_string(m.rows()) +
                                ", " + std::to_string(m.cols()) + "], expected [" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
}

HostTensor matrix(const Matrix& m) {
  return {{m.rows(), m.cols()}, std::vector<float>(m.data(), m.data() + m.size())};
}

template <typename V>
HostTensor vector(const V& v) {
  return {{v.size()}, std::vector<float>(v.data(), v.data() + v.size())};
}

void check_weights(const MapperWeights& w) {
  const MapperConfig& c = w.config;
  const Eigen::Index W = c.width, C = c.in_channels;
  if (c.heads <= 0 || W % c.heads != 0 || c.kernel % 2 == 0 || c.window < 0) {
    throw std::invalid_argument("mapper weights: width must divide by heads, kernel be odd");
  }
  check_shape("stem.weight", w.stem_w, W, C * c.kernel);
  check_shape("stem.bias", w.stem_b, 1, W);
  if (static_cast<int>(w.encoder.size()) != c.layers) {
    throw std::invalid_argument("mapper weights: " + std::to_string(w.encoder.size()) +
                                " encoder layers, the config says " + std::to_string(c.layers));
  }
  for (std::size_t i = 0; i < w.encoder.size(); ++i) {
    const MapperEncoderLayer& l = w.encoder[i];
    const std::string p = "encoder." + std::to_string(i) + ".";
    for (const auto& [n, v] : {std::pair{"norm1.weight", &l.norm1_w},
                               {"norm1.bias", &l.norm1_b},
                               {"norm2.weight", &l.norm2_w},
                               {"norm2.bias", &l.norm2_b}}) {
      check_shape(p + n, *v, W, 1);
    }
    for (const auto& [n, m] : {std::pair{"attn.q.weight", &l.wq},
                               {"attn.k.weight", &l.wk},
                               {"attn.v.weight", &l.wv},
                               {"attn.o.weight", &l.wo}}) {
      check_shape(p + n, *m, W, W);
    }
    for (const auto& [n, b] : {std::pair{"attn.q.bias", &l.bq},
                               {"attn.k.bias", &l.bk},
                               {"attn.v.bias", &l.bv},
                               {"attn.o.bias", &l.bo},
                               {"ffn.down.bias", &l.b_down}}) {
      check_shape(p + n, *b, 1, W);
    }
    check_shape(p + "ffn.up.weight", l.up, c.ffn, W);
    check_shape(p + "ffn.up.bias", l.b_up, 1, c.ffn);
    check_shape(p + "ffn.down.weight", l.down, W, c.ffn);
  }
  check_shape("encoder.norm.weight", w.norm_w, W, 1);
  check_shape("encoder.norm.bias", w.norm_b, W, 1);
  check_shape("head.target_queries", w.target_queries, c.targets, W);
  check_shape("head.source_embed", w.source_embed, C, W);
  for (const auto& [n, m] :
       {std::pair{"head.q.weight", &w.wq}, {"head.k.weight", &w.wk}, {"head.v.weight", &w.wv}}) {
    check_shape(n, *m, W, W);
  }
  check_shape("head.feature_proj", w.feature_proj, 1, W);
  check_shape("head.out.weight", w.out_w, 1, W);
}

}  // namespace

PreparedMapper prepare_mapper(const MapperWeights& w) {
  check_weights(w);
  const MapperConfig& c = w.config;
  PreparedMapper p;
  p.config = c;
  MapperTensors<HostTensor>& t = p.tensors;
  t.stem_w = matrix(w.stem_w);
  t.stem_b = vector(w.stem_b);
  for (const MapperEncoderLayer& l : w.encoder) {
    Matrix wqkv(3 * c.width, c.width);
    wqkv << l.wq, l.wk, l.wv;
    RowVector bqkv(3 * c.width);
    bqkv << l.bq, l.bk, l.bv;
    t.layers.push_back({vector(l.norm1_w), vector(l.norm1_b), matrix(wqkv), vector(bqkv),
                        matrix(l.wo), vector(l.bo), vector(l.norm2_w), vector(l.norm2_b),
                        matrix(l.up), vector(l.b_up), matrix(l.down), vector(l.b_down)});
  }
  t.norm_w = vector(w.norm_w);
  t.norm_b = vector(w.norm_b);
  const Matrix qb = w.target_queries * w.wq.transpose();   // [targets, W]
  const Matrix kb = w.source_embed * w.wk.transpose();     // [C, W]
  const RowVector kf = w.feature_proj * w.wk.transpose();  // [W]
  const RowVector wv_out = w.out_w * w.wv;                 // value -> scalar
  Matrix head_keys(c.in_channels + 2, c.width);
  head_keys << kb * w.wq, kf * w.wq, wv_out;
  t.head_keys = matrix(head_keys);
  t.g = matrix(qb * kb.transpose());
  t.u = vector(Eigen::VectorXf(qb * kf.transpose()));
  t.vb = vector(Eigen::VectorXf(w.source_embed * wv_out.transpose()));
  p.vf = w.feature_proj.dot(wv_out);
  p.out_b = w.out_b;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.width));
  return p;
}

}  // namespace kvshift::backend::gpu
