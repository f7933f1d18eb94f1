// HybridAxialMapper forward; see proxy_mapper.hpp. Tensor names:
//   stem.weight [width, in_channels, kernel], stem.bias [width]
//   encoder.<l>.norm1.{weight,bias}, encoder.<l>.attn.{q,k,v,o}.{weight [width, width], bias},
//   encoder.<l>.norm2.{weight,bias}, encoder.<l>.ffn.up.{weight [ffn, width], bias [ffn]},
//   encoder.<l>.ffn.down.{weight [width, ffn], bias}, encoder.norm.{weight,bias}
//   head.target_queries [targets, width], head.source_embed [in_channels, width],
//   head.feature_proj [width], head.{q,k,v}.weight [width, width], head.out.weight [width],
//   head.out.bias [1]
#include "backend/proxy_mapper.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "kernels/cpu.hpp"

namespace kvshift::backend {
namespace {

using Shape = std::vector<std::int64_t>;

Matrix layer_norm(const Matrix& x, const Vector& w, const Vector& b) {
  Matrix out(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const float mean = x.row(i).mean();
    const float var = (x.row(i).array() - mean).square().mean();
    out.row(i) = ((x.row(i).array() - mean) / std::sqrt(var + 1e-5f)) * w.transpose().array() +
                 b.transpose().array();
  }
  return out;
}

void gelu(Matrix& x) {
  x = x.unaryExpr([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678f)); });
}

Matrix sinusoidal_positions(Eigen::Index T, int width) {
  Matrix pe(T, width);
  for (Eigen::Index t = 0; t < T; ++t) {
    for (int i = 0; i < width; i += 2) {
      const double a = static_cast<double>(t) / std::pow(10000.0, static_cast<double>(i) / width);
      pe(t, i) = static_cast<float>(std::sin(a));
      if (i + 1 < width) pe(t, i + 1) = static_cast<float>(std::cos(a));
    }
  }
  return pe;
}

void softmax_row(Eigen::Ref<RowVector> r) {
  r.array() = (r.array() - r.maxCoeff()).exp();
  r /= r.sum();
}

}  // namespace

std::vector<std::pair<std::string, Shape>> HybridAxialMapper::tensor_shapes() const {
  const std::int64_t W = w_.config.width, F = w_.config.ffn, C = w_.config.in_channels;
  std::vector<std::pair<std::string, Shape>> s = {{"stem.weight", {W, C, w_.config.kernel}},
                                                  {"stem.bias", {W}}};
  for (int l = 0; l < w_.config.layers; ++l) {
    const std::string p = "encoder." + std::to_string(l) + ".";
    for (const char* n : {"norm1", "norm2"}) {
      s.push_back({p + n + ".weight", {W}});
      s.push_back({p + n + ".bias", {W}});
    }
    for (const char* n : {"q", "k", "v", "o"}) {
      s.push_back({p + "attn." + n + ".weight", {W, W}});
      s.push_back({p + "attn." + n + ".bias", {W}});
    }
    s.push_back({p + "ffn.up.weight", {F, W}});
    s.push_back({p + "ffn.up.bias", {F}});
    s.push_back({p + "ffn.down.weight", {W, F}});
    s.push_back({p + "ffn.down.bias", {W}});
  }
  s.push_back({"encoder.norm.weight", {W}});
  s.push_back({"encoder.norm.bias", {W}});
  s.push_back({"head.target_queries", {w_.config.targets, W}});
  s.push_back({"head.source_embed", {C, W}});
  s.push_back({"head.feature_proj", {W}});
  for (const char* n : {"q", "k", "v"}) s.push_back({std::string("head.") + n + ".weight", {W, W}});
  s.push_back({"head.out.weight", {W}});
  s.push_back({"head.out.bias", {1}});
  return s;
}

template <typename Get>
HybridAxialMapper HybridAxialMapper::build(const MapperConfig& c, Get&& get) {
  if (c.in_channels <= 0 || c.targets <= 0 || c.width <= 0 || c.heads <= 0 ||
      c.width % c.heads != 0 || c.kernel <= 0 || c.kernel % 2 == 0 || c.layers < 0 || c.ffn <= 0 ||
      c.window < 0) {
    throw InputError("mapper config: needs positive sizes, width divisible by heads, odd kernel");
  }
  HybridAxialMapper m;
  m.w_.config = c;
  const std::int64_t W = c.width, F = c.ffn;
  auto vec = [&](const std::string& n, std::int64_t size) -> Vector {
    return get(n, Shape{size}).row(0).transpose();
  };
  m.w_.stem_w = get("stem.weight", Shape{W, c.in_channels, c.kernel});
  m.w_.stem_b = vec("stem.bias", W).transpose();
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "encoder." + std::to_string(l) + ".";
    MapperEncoderLayer e;
    e.norm1_w = vec(p + "norm1.weight", W);
    e.norm1_b = vec(p + "norm1.bias", W);
    e.norm2_w = vec(p + "norm2.weight", W);
    e.norm2_b = vec(p + "norm2.bias", W);
    e.wq = get(p + "attn.q.weight", Shape{W, W});
    e.wk = get(p + "attn.k.weight", Shape{W, W});
    e.wv = get(p + "attn.v.weight", Shape{W, W});
    e.wo = get(p + "attn.o.weight", Shape{W, W});
    e.bq = vec(p + "attn.q.bias", W).transpose();
    e.bk = vec(p + "attn.k.bias", W).transpose();
    e.bv = vec(p + "attn.v.bias", W).transpose();
    e.bo = vec(p + "attn.o.bias", W).transpose();
    e.up = get(p + "ffn.up.weight", Shape{F, W});
    e.b_up = vec(p + "ffn.up.bias", F).transpose();
    e.down = get(p + "ffn.down.weight", Shape{W, F});
    e.b_down = vec(p + "ffn.down.bias", W).transpose();
    m.w_.encoder.push_back(std::move(e));
  }
  m.w_.norm_w = vec("encoder.norm.weight", W);
  m.w_.norm_b = vec("encoder.norm.bias", W);
  m.w_.target_queries = get("head.target_queries", Shape{c.targets, W});
  m.w_.source_embed = get("head.source_embed", Shape{c.in_channels, W});
  m.w_.feature_proj = vec("head.feature_proj", W).transpose();
  m.w_.wq = get("head.q.weight", Shape{W, W});
  m.w_.wk = get("head.k.weight", Shape{W, W});
  m.w_.wv = get("head.v.weight", Shape{W, W});
  m.w_.out_w = vec("head.out.weight", W).transpose();
  m.w_.out_b = get("head.out.bias", Shape{1})(0, 0);
  return m;
}

HybridAxialMapper HybridAxialMapper::random(const MapperConfig& config, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return build(config, [&](const std::string& name, const Shape& shape) {
    const std::int64_t rows = shape.size() == 1 ? 1 : shape[0];
    std::int64_t cols = 1;
    for (std::size_t i = shape.size() == 1 ? 0 : 1; i < shape.size(); ++i) cols *= shape[i];
    const bool is_norm_weight = name.find("norm") != std::string::npos && name.ends_with(".weight");
    std::normal_distribution<float> d(is_norm_weight ? 1.0f : 0.0f,
                                      is_norm_weight ? 0.1f : 1.0f / std::sqrt(float(cols)));
    Matrix m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
    return m;
  });
}

HybridAxialMapper HybridAxialMapper::load(const SafetensorsFile& file, const MapperConfig& config) {
  return build(config,
               [&](const std::string& name, const Shape& shape) { return file.read(name, shape); });
}

Matrix HybridAxialMapper::encoder_attention(const MapperEncoderLayer& l, const Matrix& a) const {
  const Eigen::Index T = a.rows(), W = w_.config.width, dh = W / w_.config.heads,
                     r = w_.config.window / 2;
  Matrix q = a * l.wq.transpose(), k = a * l.wk.transpose(), v = a * l.wv.transpose();
  q.rowwise() += l.bq;
  k.rowwise() += l.bk;
  v.rowwise() += l.bv;
  Matrix out(T, W);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
#pragma omp parallel for schedule(static) if (T * W * (2 * r + 1) > 4'000'000 && \
                                              kernels::cpu::threads() > 1)       \
    num_threads(kernels::cpu::threads())
  for (Eigen::Index t = 0; t < T; ++t) {
    const Eigen::Index lo = std::max<Eigen::Index>(0, t - r), hi = std::min(T - 1, t + r);
    for (int h = 0; h < w_.config.heads; ++h) {
      RowVector s = (k.block(lo, h * dh, hi - lo + 1, dh) * q.block(t, h * dh, 1, dh).transpose())
                        .transpose() *
                    scale;
      softmax_row(s);
      out.block(t, h * dh, 1, dh) = s * v.block(lo, h * dh, hi - lo + 1, dh);
    }
  }
  Matrix o = out * l.wo.transpose();
  o.rowwise() += l.bo;
  return o;
}

Matrix HybridAxialMapper::encode(const Matrix& x) const {
  kernels::cpu::apply_threads();
  if (x.rows() != w_.config.in_channels) {
    throw InputError("mapper input: expected " + std::to_string(w_.config.in_channels) +
                     " feature rows, got " + std::to_string(x.rows()));
  }
  const Eigen::Index T = x.cols(), C = x.rows(), k = w_.config.kernel, r = k / 2;
  Matrix cols = Matrix::Zero(T, C * k);  // im2col: column c·k + j holds x[c, t + j − r]
  for (Eigen::Index t = 0; t < T; ++t) {
    for (Eigen::Index j = 0; j < k; ++j) {
      const Eigen::Index s = t + j - r;
      if (s < 0 || s >= T) continue;
      for (Eigen::Index c = 0; c < C; ++c) cols(t, c * k + j) = x(c, s);
    }
  }
  Matrix h = cols * w_.stem_w.transpose();
  h.rowwise() += w_.stem_b;
  gelu(h);
  h += sinusoidal_positions(T, w_.config.width);
  for (const MapperEncoderLayer& l : w_.encoder) {
    h += encoder_attention(l, layer_norm(h, l.norm1_w, l.norm1_b));
    Matrix f = layer_norm(h, l.norm2_w, l.norm2_b) * l.up.transpose();
    f.rowwise() += l.b_up;
    gelu(f);
    Matrix d = f * l.down.transpose();
    d.rowwise() += l.b_down;
    h += d;
  }
  return layer_norm(h, w_.norm_w, w_.norm_b);
}

Matrix HybridAxialMapper::forward(const Matrix& x) const {
  const Matrix e = encode(x);
  const Eigen::Index T = x.cols();
  const float scale = 1.0f / std::sqrt(static_cast<float>(w_.config.width));
  const Matrix qb = w_.target_queries * w_.wq.transpose();   // [targets, W]
  const Matrix kb = w_.source_embed * w_.wk.transpose();     // [C, W]
  const RowVector kf = w_.feature_proj * w_.wk.transpose();  // [W]
  const Matrix qe = e * w_.wq.transpose();                   // [T, W]
  const Matrix g = qb * kb.transpose();                      // [targets, C]
  const Vector u = qb * kf.transpose();                      // [targets]
  const Matrix s = qe * kb.transpose();                      // [T, C]
  const Vector c = qe * kf.transpose();                      // [T]
  const RowVector wv_out = w_.out_w * w_.wv;  // value → scalar: v·out_w = (in)·wv_out
  const Vector vb = w_.source_embed * wv_out.transpose();  // [C]
  const float vf = w_.feature_proj.dot(wv_out);
  const Vector ve = e * wv_out.transpose();  // [T]
  Matrix y(w_.config.targets, T);
#pragma omp parallel for schedule(static) if (T * g.size() > 1'000'000 &&  \
                                              kernels::cpu::threads() > 1) \
    num_threads(kernels::cpu::threads())
  for (Eigen::Index t = 0; t < T; ++t) {
    const RowVector xt = x.col(t).transpose();
    Matrix logits = g + u * xt;
    logits.rowwise() += s.row(t) + c[t] * xt;
    logits *= scale;
    const Vector values = vb + vf * xt.transpose();
    for (Eigen::Index j = 0; j < logits.rows(); ++j) softmax_row(logits.row(j));
    y.col(t) = (logits * values).array() + ve[t] + w_.out_b;
  }
  return y;
}

Matrix HybridAxialMapper::forward_direct(const Matrix& x) const {
  const Matrix e = encode(x);
  const float scale = 1.0f / std::sqrt(static_cast<float>(w_.config.width));
  Matrix y(w_.config.targets, x.cols());
  for (Eigen::Index t = 0; t < x.cols(); ++t) {
    Matrix qin = w_.target_queries;
    qin.rowwise() += e.row(t);
    Matrix src = w_.source_embed + x.col(t) * w_.feature_proj;
    src.rowwise() += e.row(t);
    const Matrix q = qin * w_.wq.transpose(), k = src * w_.wk.transpose(),
                 v = src * w_.wv.transpose();
    Matrix p = q * k.transpose() * scale;
    for (Eigen::Index j = 0; j < p.rows(); ++j) softmax_row(p.row(j));
    y.col(t) = ((p * v) * w_.out_w.transpose()).array() + w_.out_b;
  }
  return y;
}

}  // namespace kvshift::backend

// ---------------------------------------------------------------- load_mapper
namespace kvshift::backend {
namespace {

namespace fs = std::filesystem;

// The weights and the JSON that describes them, as load_mapper() documents.
std::pair<fs::path, fs::path> mapper_files(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) return {p / "mapper.safetensors", p / "mapper.json"};
  if (!fs::exists(p)) throw InputError(path + ": mapper file not found");
  fs::path json = fs::path(p).replace_extension(".json");
  if (!fs::exists(json)) json = p.parent_path() / "mapper.json";
  return {p, json};
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": not found (the mapper's architecture file)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InputError(path.string() + ": not a JSON object");
  return j;
}

// Every architecture problem at once: "f: /architecture/width: must be ... (got "64")".
MapperConfig read_architecture(const nlohmann::json& j, const std::string& file) {
  const bool ours = j.contains("format") && j["format"] == "kvshift-proxykv-mapper" &&
                    j.contains("version") && j["version"] == 1;
  if (!ours) {
    throw InputError(file + ": /format, /version: must be \"kvshift-proxykv-mapper\", 1 (got " +
                     j.value("format", nlohmann::json()).dump() + ", " +
                     j.value("version", nlohmann::json()).dump() + ")");
  }
  if (!j.contains("architecture") || !j["architecture"].is_object()) {
    throw InputError(file + ": /architecture: missing (an object of the mapper's sizes)");
  }
  const nlohmann::json& a = j["architecture"];
  MapperConfig c;
  std::vector<std::string> problems;
  const std::pair<const char*, int*> fields[] = {
      {"in_channels", &c.in_channels}, {"targets", &c.targets}, {"width", &c.width},
      {"layers", &c.layers},           {"heads", &c.heads},     {"ffn", &c.ffn},
      {"kernel", &c.kernel},           {"window", &c.window}};
  for (const auto& [name, field] : fields) {
    const int least = std::string(name) == "layers" || std::string(name) == "window" ? 0 : 1;
    const std::string where = "/architecture/" + std::string(name);
    if (!a.contains(name)) {
      problems.push_back(where + ": missing");
    } else if (!a[name].is_number_integer() || a[name].get<std::int64_t>() < least ||
               a[name].get<std::int64_t>() > 1'000'000) {
      problems.push_back(where + ": must be an integer ≥ " + std::to_string(least) + " (got " +
                         a[name].dump() + ")");
    } else {
      *field = a[name].get<int>();
    }
  }
  if (problems.empty() && c.width % c.heads != 0) {
    problems.push_back("/architecture/width: " + std::to_string(c.width) +
                       " is not divisible by heads " + std::to_string(c.heads));
  }
  if (problems.empty() && c.kernel % 2 == 0) {
    problems.push_back("/architecture/kernel: must be odd (got " + std::to_string(c.kernel) + ")");
  }
  if (!problems.empty()) {
    std::string text = file + ": ";
    for (std::size_t i = 0; i < problems.size(); ++i) text += (i ? "; " : "") + problems[i];
    throw InputError(text);
  }
  return c;
}

}  // namespace

nlohmann::json read_mapper_manifest(const std::string& path) {
  return read_json(mapper_files(path).second);
}

HybridAxialMapper load_mapper(const std::string& path) {
  const auto [weights, json] = mapper_files(path);
  const nlohmann::json manifest = read_json(json);
  MapperConfig config = read_architecture(manifest, json.string());
  config.features = mapper_features(manifest, json.string());
  if (!fs::exists(weights)) throw InputError(weights.string() + ": not found (mapper weights)");
  return HybridAxialMapper::load(SafetensorsFile::open(weights.string()), config);
}

MapperProxy mapper_proxy(const nlohmann::json& manifest, const std::string& mapper_path) {
  const nlohmann::json* proxy = manifest.contains("dataset") && manifest["dataset"].is_object() &&
                                        manifest["dataset"].contains("proxy")
                                    ? &manifest["dataset"]["proxy"]
                                    : nullptr;
  if (!proxy || !proxy->is_object()) {
    throw InputError(mapper_path +
                     ": mapper.json names no dataset.proxy (the proxy it was "
                     "trained with); give the proxy explicitly");
  }
  if (proxy->contains("truncated_layers") && (*proxy)["truncated_layers"].is_number_integer()) {
    return {"", (*proxy)["truncated_layers"].get<int>()};
  }
  if (proxy->contains("folder") && (*proxy)["folder"].is_string()) {
    return {(*proxy)["folder"].get<std::string>(), 0};
  }
  throw InputError(mapper_path + ": dataset.proxy has neither truncated_layers nor folder");
}

MapperFeatures mapper_features(const nlohmann::json& manifest, const std::string& mapper_path) {
  const nlohmann::json* d = manifest.contains("dataset") && manifest["dataset"].is_object()
                                ? &manifest["dataset"]
                                : nullptr;
  if (!d || !d->contains("features") || (*d)["features"].is_null()) {
    return MapperFeatures::kLogMeanAttention;  // files from before the choice existed
  }
  const nlohmann::json& f = (*d)["features"];
  const auto kind = f.is_string() ? features_of(f.get<std::string>()) : std::nullopt;
  if (!kind) {
    throw InputError(mapper_path + ": /dataset/features: must be \"log_mean_attention\" or " +
                     "\"log_repeat_max_attention\" (got " + f.dump() + ")");
  }
  return *kind;
}

std::string mapper_target(const nlohmann::json& manifest) {
  if (!manifest.contains("dataset") || !manifest["dataset"].is_object()) return "";
  const auto& d = manifest["dataset"];
  if (!d.contains("target") || !d["target"].is_object()) return "";
  const auto& name = d["target"].contains("name") ? d["target"]["name"] : nlohmann::json();
  return name.is_string() ? name.get<std::string>() : "";
}

void check_mapper_fits(const MapperConfig& config, int in_channels, int targets,
                       const std::string& what) {
  if (config.in_channels == in_channels && config.targets == targets) return;
  throw InputError(what + ": built for " + std::to_string(config.in_channels) +
                   " proxy channels × " + std::to_string(config.targets) +
                   " targets, this proxy/target pair has " + std::to_string(in_channels) + " × " +
                   std::to_string(targets) + " (proxy layers·heads × target layers·KV heads)");
}

}  // namespace kvshift::backend
