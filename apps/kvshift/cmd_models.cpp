// `kvshift models`: the built-in model specs (and GPU presets with --gpus).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/kvshift/command.hpp"
#include "cost_model/gpu_spec.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::app {
namespace {

int list_models(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : cost_model::known_models()) {
      out.push_back({{"name", m.name},
                     {"layers", m.layers},
                     {"hidden", m.hidden},
                     {"q_heads", m.q_heads},
                     {"kv_heads", m.kv_heads},
                     {"head_dim", m.head_dim},
                     {"intermediate", m.intermediate},
                     {"vocab", m.vocab},
                     {"rope_theta", m.rope_theta},
                     {"kv_dtype", cost_model::dtype_name(m.kv_dtype)},
                     {"parameters", m.parameter_count()},
                     {"kv_bytes_per_token", m.layers * m.kv_bytes_per_layer_token()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-16s %6s %6s %4s %4s %5s %7s %7s %9s %7s %11s\n", "model", "layers", "hidden", "hq",
              "hkv", "d_h", "inter", "vocab", "rope", "params", "KV/token");
  for (const auto& m : cost_model::known_models()) {
    std::printf("%-16s %6d %6d %4d %4d %5d %7d %7d %9.0f %6.0fM %8.1f KiB\n", m.name.c_str(),
                m.layers, m.hidden, m.q_heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab,
                m.rope_theta, m.parameter_count() / 1e6,
                m.layers * m.kv_bytes_per_layer_token() / 1024.0);
  }
  return 0;
}

int list_gpus(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& g : cost_model::known_gpus()) {
      out.push_back({{"name", g.name},
                     {"peak_dense_fp16_tflops", g.peak_dense_fp16.value / 1e12},
                     {"hbm_bandwidth_tb_s", g.hbm_bandwidth.value / 8e12},
                     {"hbm_capacity_gib", g.hbm_capacity.mib() / 1024.0},
                     {"host_link_gb_s", g.host_link.value / 8e9}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-16s %12s %10s %8s %10s\n", "gpu", "fp16 TFLOP/s", "HBM TB/s", "HBM GiB",
              "host GB/s");
  for (const auto& g : cost_model::known_gpus()) {
    std::printf("%-16s %12.1f %10.2f %8.0f %10.0f\n", g.name.c_str(),
                g.peak_dense_fp16.value / 1e12, g.hbm_bandwidth.value / 8e12,
                g.hbm_capacity.mib() / 1024.0, g.host_link.value / 8e9);
  }
  return 0;
}

Action setup(CLI::App& sub) {
  auto json = std::make_shared<bool>(false);
  auto gpus = std::make_shared<bool>(false);
  sub.add_flag("--json", *json, "Print JSON");
  sub.add_flag("--gpus", *gpus, "List the GPU presets instead");
  return [json, gpus] { return *gpus ? list_gpus(*json) : list_models(*json); };
}

const RegisterCommand kRegister{
    {"models", "List the known model specs (and GPU presets)", 40, setup}};

}  // namespace
}  // namespace kvshift::app
