// Predictor file writer; see predictor_file.hpp.
#include "backend/calibrate/predictor_file.hpp"

#include <Eigen/Core>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

std::string layer_list(const std::vector<int>& layers) {
  std::string s;
  for (int l : layers) s += (s.empty() ? "" : ",") + std::to_string(l);
  return s;
}

void append_values(std::string& data, const float* values, std::size_t count, bool half) {
  for (std::size_t i = 0; i < count; ++i) {
    if (half) {
      const auto bits = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(values[i]));
      data.push_back(static_cast<char>(bits & 0xff));
      data.push_back(static_cast<char>(bits >> 8));
    } else {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &values[i], 4);
      for (int b = 0; b < 4; ++b) data.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
    }
  }
}

}  // namespace

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
  nlohmann::json header;
  nlohmann::json meta = {{"format", "kvshift-risk-kv-predictors"},
                         {"model", model_name},
                         {"dtype", half ? "F16" : "F32"}};
  std::string groups_text;
  std::string data;
  for (const FittedGroup& g : groups) {
    const std::string name = "G" + std::to_string(g.group);
    groups_text += (groups_text.empty() ? "" : ",") + std::to_string(g.group);
    meta[name + ".anchor_layers"] = layer_list(g.predictor.anchor_layers);
    meta[name + ".target_layers"] = layer_list(g.predictor.target_layers);
    auto add = [&](const std::string& tensor, const float* v, std::vector<std::int64_t> shape,
                   std::size_t count) {
      const std::size_t begin = data.size();
      append_values(data, v, count, half);
      header[tensor] = {{"dtype", half ? "F16" : "F32"},
                        {"shape", shape},
                        {"data_offsets", {begin, data.size()}}};
    };
    // Matrix is row-major, as safetensors expects.
    add(name + ".weight", g.predictor.weight.data(),
        {g.predictor.weight.rows(), g.predictor.weight.cols()},
        static_cast<std::size_t>(g.predictor.weight.size()));
    add(name + ".bias", g.predictor.bias.data(), {g.predictor.bias.size()},
        static_cast<std::size_t>(g.predictor.bias.size()));
  }
  meta["groups"] = groups_text;
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  const std::uint64_t len = text.size();
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((len >> (8 * b)) & 0xff);
  return out + text + data;
}

}  // namespace kvshift::backend::calibrate
