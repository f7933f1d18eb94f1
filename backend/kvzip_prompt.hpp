// KVZip's "repeat the previous context" prompt as token ids. The backend has no
// tokenizer, so tools/tokenize_prompt.py writes them once per model folder, to
// <folder>/kvzip_prompt.json = {"text": "...", "ids": [...]} (tools/prepare_model.sh
// does so for models/smollm2-135m). The wording follows the official KVZip code;
// see tools/tokenize_prompt.py. Leaves out: the later chunks' "starting with"
// prompt (kvzip_scores reuses this one for every chunk).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvshift::backend {

/// The prompt as tokenize_prompt.py wrote it.
struct KvzipPrompt {
  std::string text;
  std::vector<std::int32_t> ids;
};

/// <model_folder>/kvzip_prompt.json. InputError when it is missing (naming the command that
/// creates it), unreadable or malformed (no text, no ids, an id below 0).
KvzipPrompt read_kvzip_prompt(const std::string& model_folder);

/// The prompt's token ids (read_kvzip_prompt(model_folder).ids), to pass to kvzip_scores.
std::vector<std::int32_t> kvzip_repeat_prompt(const std::string& model_folder);

}  // namespace kvshift::backend
