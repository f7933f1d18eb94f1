// Predictor file writer and reader; see predictor_file.hpp.
#include "backend/calibrate/predictor_file.hpp"

#include <Eigen/Core>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

#include "backend/safetensors.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

std::string layer_list(const std::vector<int>& layers) {
  std::string s;
  for (int l : layers) s += (s.empty() ? "" : ",") + std::to_string(l);
  return s;
}

/// `count` values as F32 or F16 (round to nearest even) bytes.
std::string value_bytes(const float* values, std::size_t count, bool half) {
  std::string data;
  for (std::size_t i = 0; i < count; ++i) {
    if (half) {
      const auto bits = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(values[i]));
      append_raw(data, &bits, 2);
    } else {
      append_raw(data, &values[i], 4);
    }
  }
  return data;
}

/// "0,1,6,7" → {0, 1, 6, 7}: ascending layers of the model; throws naming `what`.
std::vector<int> parse_layer_list(const std::string& text, int layers, const std::string& what) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::size_t used = 0;
    int l = -1;
    try {
      l = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || l < 0 || l >= layers ||
        (!out.empty() && l <= out.back())) {
      throw InputError(what + ": \"" + text + "\" is not an ascending list of layers in [0, " +
                       std::to_string(layers) + ")");
    }
    out.push_back(l);
    pos = comma + 1;
  }
  if (out.empty()) throw InputError(what + ": no layers listed");
  return out;
}

}  // namespace

std::vector<StoredPredictor> read_predictors(const std::string& path,
                                             const cost_model::ModelSpec& spec) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  const auto& meta = file.metadata();
  auto field = [&](const std::string& key) -> const std::string& {
    const auto it = meta.find(key);
    if (it == meta.end()) {
      throw InputError(path + ": __metadata__ has no \"" + key +
                       "\" (not a predictors file written by kvshift calibrate?)");
    }
    return it->second;
  };
  if (field("format") != "kvshift-risk-kv-predictors") {
    throw InputError(path + ": __metadata__.format is \"" + field("format") +
                     "\", expected \"kvshift-risk-kv-predictors\"");
  }
  // Absent in files written before sink rows existed: every row rebuilt.
  int sink_rows = 0;
  if (const auto it = meta.find("sink_rows"); it != meta.end()) {
    std::size_t used = 0;
    long v = -1;
    try {
      v = std::stol(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size() || v < 0 || v > (1 << 24)) {
      throw InputError(path + ": __metadata__.sink_rows is \"" + it->second +
                       "\", expected a whole number of rows >= 0");
    }
    sink_rows = static_cast<int>(v);
  }
  std::vector<StoredPredictor> out;
  const std::vector<int> groups =
      parse_layer_list(field("groups"), std::numeric_limits<int>::max(), path + ": groups");
  const std::int64_t w = spec.kv_width();
  for (int g : groups) {
    const std::string name = "G" + std::to_string(g);
    StoredPredictor p{g, {}};
    p.predictor.sink_rows = sink_rows;
    p.predictor.anchor_layers =
        parse_layer_list(field(name + ".anchor_layers"), spec.layers, path + ": " + name);
    p.predictor.target_layers =
        parse_layer_list(field(name + ".target_layers"), spec.layers, path + ": " + name);
    const auto a = static_cast<std::int64_t>(p.predictor.anchor_layers.size());
    const auto t = static_cast<std::int64_t>(p.predictor.target_layers.size());
    p.predictor.weight = file.read(name + ".weight", {a * w, t * w});
    p.predictor.bias = file.read(name + ".bias", {t * w}).row(0);
    if (spec.gemma) {  // written with the keys' norms since the model needs them
      if (!file.find(name + ".key_norm")) {
        throw InputError(path + ": " + name + ".key_norm is missing (model " + spec.name +
                         " norms its keys; recalibrate with this kvshift)");
      }
      p.predictor.key_norm = file.read(name + ".key_norm", {t, spec.head_dim});
      p.predictor.norm_eps = static_cast<float>(spec.rms_eps);
    }
    out.push_back(std::move(p));
  }
  return out;
}

double predictor_bytes(const GroupPredictor& p, cost_model::DType dtype) {
  return static_cast<double>(p.weight.size() + p.bias.size()) *
         static_cast<double>(cost_model::dtype_bytes(dtype));
}

std::string predictors_safetensors(const std::vector<FittedGroup>& groups, cost_model::DType dtype,
                                   const std::string& model_name) {
  if (dtype != cost_model::DType::kF32 && dtype != cost_model::DType::kF16) {
    throw InputError("--predictor-dtype: predictors are written as fp32 or fp16 (got " +
                     std::string(cost_model::dtype_name(dtype)) + ")");
  }
  const bool half = dtype == cost_model::DType::kF16;
  const std::string dt = half ? "F16" : "F32";
  std::map<std::string, std::string> meta = {
      {"format", "kvshift-risk-kv-predictors"}, {"model", model_name}, {"dtype", dt}};
  std::string groups_text;
  std::vector<RawTensor> tensors;
  for (const FittedGroup& g : groups) {
    const std::string name = "G" + std::to_string(g.group);
    groups_text += (groups_text.empty() ? "" : ",") + std::to_string(g.group);
    meta[name + ".anchor_layers"] = layer_list(g.predictor.anchor_layers);
    meta[name + ".target_layers"] = layer_list(g.predictor.target_layers);
    // Matrix is row-major, as safetensors expects.
    const Matrix& w = g.predictor.weight;
    tensors.push_back({name + ".weight",
                       dt,
                       {w.rows(), w.cols()},
                       value_bytes(w.data(), static_cast<std::size_t>(w.size()), half)});
    const RowVector& b = g.predictor.bias;
    tensors.push_back({name + ".bias",
                       dt,
                       {b.size()},
                       value_bytes(b.data(), static_cast<std::size_t>(b.size()), half)});
    if (const Matrix& n = g.predictor.key_norm; n.size()) {  // the model's own weights: F32
      tensors.push_back({name + ".key_norm",
                         "F32",
                         {n.rows(), n.cols()},
                         value_bytes(n.data(), static_cast<std::size_t>(n.size()), false)});
    }
  }
  meta["groups"] = groups_text;
  if (!groups.empty() && groups.front().predictor.sink_rows > 0) {
    for (const FittedGroup& g : groups) {
      if (g.predictor.sink_rows != groups.front().predictor.sink_rows) {
        throw std::logic_error("predictors_safetensors: groups differ in sink_rows");
      }
    }
    meta["sink_rows"] = std::to_string(groups.front().predictor.sink_rows);
  }
  return safetensors_image(tensors, meta);
}

}  // namespace kvshift::backend::calibrate
