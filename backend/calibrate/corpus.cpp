// Calibration requests; see corpus.hpp.
#include "backend/calibrate/corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"

namespace kvshift::backend::calibrate {
namespace {

int parse_count(const std::string& item, const std::string& value, const std::string& field) {
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 0) {
    throw InputError(field + ": \"" + item + "\": expected a count >= 0 after the colon");
  }
  return n;
}

/// Vocabulary size of a tokenizer.json (model vocab plus added tokens beyond it), or -1.
int tokenizer_vocab(const std::string& model_folder) {
  const std::filesystem::path path = std::filesystem::path(model_folder) / "tokenizer.json";
  if (!std::filesystem::exists(path)) return -1;
  const input::Json doc = input::read_json_file(path.string());
  std::int64_t max_id = -1;
  if (doc.contains("model") && doc["model"].contains("vocab") &&
      doc["model"]["vocab"].is_object()) {
    for (const auto& [piece, id] : doc["model"]["vocab"].items()) {
      if (id.is_number_integer()) max_id = std::max<std::int64_t>(max_id, id.get<std::int64_t>());
    }
  }
  if (doc.contains("added_tokens") && doc["added_tokens"].is_array()) {
    for (const auto& t : doc["added_tokens"]) {
      if (t.contains("id") && t["id"].is_number_integer()) {
        max_id = std::max<std::int64_t>(max_id, t["id"].get<std::int64_t>());
      }
    }
  }
  return max_id < 0 ? -1 : static_cast<int>(max_id + 1);
}

}  // namespace

RequestCounts parse_request_counts(const std::string& text, const RequestCounts& defaults,
                                   const std::string& field) {
  RequestCounts c = defaults;
  std::vector<std::string> seen;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      throw InputError(field + ": \"" + item + "\": expected name:count (e.g. fit:24)");
    }
    const std::string key = item.substr(0, colon);
    const int n = parse_count(item, item.substr(colon + 1), field);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw InputError(field + ": \"" + key + "\" is given more than once");
    }
    seen.push_back(key);
    if (key == "fit")
      c.fit = n;
    else if (key == "select")
      c.select = n;
    else if (key == "test")
      c.test = n;
    else if (key == "confirm")
      c.confirm = n;
    else if (key == "order")
      c.order = n;
    else {
      const std::string hint =
          input::did_you_mean(key, {"fit", "order", "select", "test", "confirm"});
      throw InputError(field + ": unknown set \"" + key +
                       "\" (expected fit, order, select, test, confirm" +
                       (hint.empty() ? ")" : "; did you mean \"" + hint + "\"?)"));
    }
  }
  if (c.fit < 2)
    throw InputError(field + ": fit needs at least 2 requests (one is held out to choose lambda)");
  if (c.select < 1) throw InputError(field + ": select needs at least 1 request");
  // One test request would report a zero-width "95 % interval" around its own value.
  if (c.test < 2)
    throw InputError(field + ": test needs at least 2 requests (for its 95 % interval)");
  return c;
}

std::vector<std::int32_t> read_tokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError("--corpus: cannot open \"" + path + "\"");
  const std::streamoff size = in.tellg();
  if (size <= 0 || size % 4 != 0) {
    throw InputError("--corpus: \"" + path + "\" is not a token file (" + std::to_string(size) +
                     " bytes; expected a non-empty multiple of 4: little-endian int32 ids)");
  }
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(size / 4));
  in.seekg(0);
  std::vector<unsigned char> raw(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(raw.data()), size);
  if (!in) throw InputError("--corpus: could not read \"" + path + "\"");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const unsigned char* b = raw.data() + 4 * i;
    tokens[i] = static_cast<std::int32_t>(
        static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
        static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24);
  }
  return tokens;
}

void check_vocabulary(const std::vector<std::int32_t>& tokens, int vocab,
                      const std::string& tokens_path, const std::string& model_folder) {
  std::filesystem::path sidecar(tokens_path);
  sidecar.replace_extension(".json");
  if (std::filesystem::exists(sidecar)) {
    const input::Json doc = input::read_json_file(sidecar.string());
    input::Diagnostics diag;
    const input::Reader r(doc, "", diag);
    if (auto v = r.integer("vocab_size", false); v && *v != vocab) {
      throw InputError("tokenizer/model vocabulary mismatch: " + sidecar.string() +
                       " says the corpus was tokenised with a " + std::to_string(*v) +
                       "-token vocabulary, but the model has " + std::to_string(vocab));
    }
  }
  if (const int tv = tokenizer_vocab(model_folder); tv > vocab) {
    throw InputError("tokenizer/model vocabulary mismatch: " + model_folder +
                     "/tokenizer.json has " + std::to_string(tv) + " tokens, the model " +
                     std::to_string(vocab));
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw InputError("tokenizer/model vocabulary mismatch: " + tokens_path + ": token " +
                       std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                       ", outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
}

CorpusSpan parse_span(const std::string& text, const std::string& field) {
  const auto colon = text.find(':');
  CorpusSpan s;
  bool ok = colon != std::string::npos;
  if (ok) {
    try {
      std::size_t a = 0, b = 0;
      const std::string lo = text.substr(0, colon), hi = text.substr(colon + 1);
      s.begin = std::stod(lo, &a);
      s.end = std::stod(hi, &b);
      ok = a == lo.size() && b == hi.size();
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || !(s.begin >= 0.0 && s.begin < s.end && s.end <= 1.0)) {
    throw InputError(field + ": \"" + text +
                     "\": expected A:B, shares of the corpus with 0 <= A < B <= 1 (e.g. 0:0.8)");
  }
  return s;
}

std::string span_text(const CorpusSpan& span) {
  std::ostringstream o;
  o << span.begin << ':' << span.end;
  return o.str();
}

std::vector<std::int64_t> spread_windows(std::int64_t corpus_tokens, const CorpusSpan& span,
                                         std::int64_t window, std::int64_t count) {
  if (window < 1 || count < 1) throw std::invalid_argument("spread_windows: bad sizes");
  const auto first = static_cast<std::int64_t>(span.begin * static_cast<double>(corpus_tokens));
  const auto last = static_cast<std::int64_t>(span.end * static_cast<double>(corpus_tokens));
  const std::int64_t room = last - first;
  if (room < count * window) {
    throw InputError("--corpus: the span " + span_text(span) + " holds " + std::to_string(room) +
                     " tokens, but " + std::to_string(count) + " disjoint windows of " +
                     std::to_string(window) + " tokens need " + std::to_string(count * window) +
                     "; use fewer windows, shorter ones or a wider span");
  }
  const std::int64_t stride = count > 1 ? (room - window) / (count - 1) : 0;
  std::vector<std::int64_t> starts;
  for (std::int64_t i = 0; i < count; ++i) starts.push_back(first + i * std::max(stride, window));
  return starts;
}

RequestSets make_request_sets(std::int64_t corpus_tokens, std::int64_t window,
                              const RequestCounts& counts, std::uint64_t seed) {
  const std::int64_t n = counts.total();
  if (window < 2 || n < 1) throw std::invalid_argument("make_request_sets: bad sizes");
  if (corpus_tokens < n * window) {
    throw InputError("--corpus: holds " + std::to_string(corpus_tokens) + " tokens, but " +
                     std::to_string(n) + " disjoint requests of " + std::to_string(window) +
                     " tokens (history + eval) need " + std::to_string(n * window) +
                     "; use fewer requests (--requests) or a shorter --history/--eval");
  }
  // Evenly spread disjoint windows: window i starts at i·stride.
  const std::int64_t stride = n > 1 ? (corpus_tokens - window) / (n - 1) : 0;
  std::vector<Window> all;
  for (std::int64_t i = 0; i < n; ++i) all.push_back({i * std::max(stride, window)});
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  RequestSets s;
  auto take = [&, next = std::size_t{0}](std::vector<Window>& dst, int count) mutable {
    dst.assign(all.begin() + next, all.begin() + next + count);
    next += count;
  };
  take(s.fit, counts.fit);
  take(s.select, counts.select);
  take(s.test, counts.test);
  take(s.confirm, counts.confirm);
  take(s.order, counts.order);
  return s;
}

}  // namespace kvshift::backend::calibrate
