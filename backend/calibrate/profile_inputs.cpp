// Loading and cross-checking the real inputs of a profile; see profile_inputs.hpp.
#include "backend/calibrate/profile_inputs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/calibrate/predictor_file.hpp"
#include "backend/kvzip_prompt.hpp"
#include "backend/proxy_dataset.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/proxy_scoring.hpp"
#include "backend/reconstruct.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

namespace fs = std::filesystem;

/// FNV-1a over 8-byte words (then the tail bytes): a content fingerprint, not a MAC.
std::uint64_t digest_file(const fs::path& path, std::uint64_t h) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot read it to take its digest");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, buf.data() + i, 8);
      h = (h ^ w) * 0x100000001B3ULL;
    }
    for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001B3ULL;
  }
  return h;
}

ModelWeights load_folder(const std::string& folder, const std::string& what) {
  try {
    return load_hf_model(folder);
  } catch (const InputError& e) {
    throw InputError(what + ": " + e.what());
  }
}

/// The stored predictor of each topology group, in the topology's order.
std::vector<GroupPredictor> predictors_for(const std::string& path, const std::string& what,
                                           const cost_model::ModelSpec& spec,
                                           const cost_model::OmissionPlan& topology) {
  std::vector<calibrate::StoredPredictor> stored;
  try {
    stored = calibrate::read_predictors(path, spec);
  } catch (const InputError& e) {
    throw InputError(what + ": " + e.what());
  }
  std::string held;
  for (const auto& s : stored) held += (held.empty() ? "G" : ", G") + std::to_string(s.group);
  std::vector<GroupPredictor> out;
  for (const cost_model::GroupPlan& g : topology.groups()) {
    auto it = std::find_if(stored.begin(), stored.end(), [&](const auto& s) {
      return s.group == g.group && s.predictor.anchor_layers == g.anchor_layers &&
             s.predictor.target_layers == g.target_layers;
    });
    if (it == stored.end()) {
      throw InputError(what + ": " + path + " holds no predictor for G" + std::to_string(g.group) +
                       " with the topology's anchor and target layers (it holds " +
                       (held.empty() ? "none" : held) +
                       "); give the predictors.safetensors calibrated with this topology");
    }
    out.push_back(it->predictor);
  }
  return out;
}

}  // namespace

std::string digest_path(const std::string& path) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  const fs::path p(path);
  if (fs::is_directory(p)) {
    h = digest_file(p / "config.json", h);
    const fs::path index = p / "model.safetensors.index.json";
    if (fs::exists(p / "model.safetensors")) {
      h = digest_file(p / "model.safetensors", h);
    } else if (fs::exists(index)) {
      h = digest_file(index, h);  // the shards are named in it; their bytes follow in name order
      std::vector<fs::path> shards;
      for (const auto& e : fs::directory_iterator(p)) {
        const std::string n = e.path().filename().string();
        if (n.starts_with("model-") && n.ends_with(".safetensors")) shards.push_back(e.path());
      }
      std::sort(shards.begin(), shards.end());
      for (const auto& s : shards) h = digest_file(s, h);
    }
  } else {
    h = digest_file(p, h);
  }
  char text[32];
  std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return text;
}

ProfileInputs load_profile_inputs(const ProfilePaths& paths,
                                  const cost_model::OmissionPlan& topology) {
  const auto& names = paths.names;
  ProfileInputs in;
  if (paths.model.empty()) {
    for (const auto& [given, name] : {std::pair{!paths.predictors.empty(), names.predictors},
                                      {!paths.proxy.empty(), names.proxy},
                                      {paths.proxy_layers > 0, names.proxy_layers}}) {
      if (given) throw InputError(name + ": needs " + names.model + " (a folder with weights)");
    }
  } else {
    in.target = std::make_shared<const ModelWeights>(load_folder(paths.model, names.model));
    in.target_origin = {paths.model, digest_path(paths.model)};
  }
  if (!paths.proxy.empty() && paths.proxy_layers > 0) {
    throw InputError(names.proxy + " and " + names.proxy_layers + ": give one of them");
  }
  if (!paths.predictors.empty() && in.target) {
    in.predictors = std::make_shared<const std::vector<GroupPredictor>>(
        predictors_for(paths.predictors, names.predictors, in.target->spec, topology));
    in.predictors_origin = {paths.predictors, digest_path(paths.predictors)};
  }
  MapperProxy proxy{paths.proxy, paths.proxy_layers};
  if (!paths.mapper.empty()) {
    const nlohmann::json manifest = read_mapper_manifest(paths.mapper);
    const std::string trained_for = mapper_target(manifest);
    if (in.target && !trained_for.empty() && trained_for != in.target->spec.name) {
      throw InputError(names.mapper + ": " + paths.mapper + " was trained for " + trained_for +
                       ", not for " + in.target->spec.name);
    }
    if (proxy.folder.empty() && proxy.truncated_layers == 0 && in.target) {
      proxy = mapper_proxy(manifest, paths.mapper);
    }
    in.mapper = std::make_shared<const HybridAxialMapper>(load_mapper(paths.mapper));
    in.mapper_weights = shared_weights(in.mapper);
    if (in.mapper->config().features == MapperFeatures::kLogRepeatMax) {
      in.repeat_prompt = kvzip_repeat_prompt(paths.model);  // the proxy shares the tokenizer
    }
    in.mapper_origin = {paths.mapper, digest_path(paths.mapper)};
  }
  if (in.target && !proxy.folder.empty()) {
    ModelWeights w = load_folder(proxy.folder, names.proxy);
    check_proxy_pair(w.spec, in.target->spec, names.proxy);
    in.proxy = std::make_shared<const ModelWeights>(std::move(w));
    in.proxy_origin = {proxy.folder, digest_path(proxy.folder)};
  } else if (in.target && proxy.truncated_layers > 0) {
    in.proxy =
        std::make_shared<const ModelWeights>(truncate_layers(*in.target, proxy.truncated_layers));
    in.proxy_origin = {
        paths.model + " (first " + std::to_string(proxy.truncated_layers) + " layers)",
        in.target_origin.digest};
  }
  if (in.mapper && in.proxy) {
    const auto& p = in.proxy->spec;
    const auto& t = in.target->spec;
    check_mapper_fits(in.mapper->config(), p.layers * p.q_heads, t.layers * t.kv_heads,
                      names.mapper + " " + paths.mapper);
  }
  return in;
}

}  // namespace kvshift::backend::calibrate
