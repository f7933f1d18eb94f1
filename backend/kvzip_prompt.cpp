// Reads <model folder>/kvzip_prompt.json; see kvzip_prompt.hpp.
#include "backend/kvzip_prompt.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cost_model/input_error.hpp"

namespace kvshift::backend {

KvzipPrompt read_kvzip_prompt(const std::string& model_folder) {
  const std::filesystem::path path = std::filesystem::path(model_folder) / "kvzip_prompt.json";
  if (!std::filesystem::exists(path)) {
    throw InputError(path.string() +
                     " not found: KVZip's repeat prompt has not been tokenised for this model; "
                     "create it with `tools/.venv/bin/python tools/tokenize_prompt.py --model " +
                     model_folder + "` (tools/prepare_model.sh does this for models/smollm2-135m)");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(path.string() + ": cannot be read");
  const auto bad = [&](const std::string& why) {
    return InputError(path.string() + ": " + why +
                      " (expected {\"text\": \"...\", \"ids\": [...]}, as tools/tokenize_prompt.py "
                      "writes it; rerun it)");
  };
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw bad("not a JSON object");
  if (!doc.contains("text") || !doc["text"].is_string()) throw bad("\"text\" is missing");
  if (!doc.contains("ids") || !doc["ids"].is_array() || doc["ids"].empty()) {
    throw bad("\"ids\" is missing or empty");
  }
  KvzipPrompt p{doc["text"].get<std::string>(), {}};
  for (const auto& id : doc["ids"]) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      throw bad("\"ids\" holds " + id.dump() + ", not a token id");
    }
    p.ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  return p;
}

std::vector<std::int32_t> kvzip_repeat_prompt(const std::string& model_folder) {
  return read_kvzip_prompt(model_folder).ids;
}

}  // namespace kvshift::backend
