#include "input/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "cost_model/input_error.hpp"

namespace kvshift::input {
namespace {

std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string shown(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

void Diagnostics::add(std::string pointer, std::string message) {
  items_.push_back((pointer.empty() ? std::string("/") : pointer) + ": " + message);
}

void Diagnostics::throw_if_any(std::string_view source) const {
  if (items_.empty()) return;
  std::string msg;
  for (const std::string& item : items_) {
    msg += (msg.empty() ? "" : "\n  ") + std::string(source) + ": " + item;
  }
  throw InputError(msg);
}

Json parse_json_text(std::string_view text, std::string_view source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    throw InputError(std::string(source) + ": not valid JSON at byte " + std::to_string(e.byte) +
                     ": " + e.what());
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw InputError(std::string(source) + ": not valid JSON: " + e.what());
  }
}

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path + ": cannot read file");
  return parse_json_text(text.str(), path);
}

std::string did_you_mean(std::string_view word, std::initializer_list<std::string_view> known) {
  std::string best;
  std::size_t best_d = 3;
  for (std::string_view k : known) {
    const std::size_t d = edit_distance(word, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

Reader::Reader(const Json& node, std::string pointer, Diagnostics& diag)
    : node_(&node), pointer_(std::move(pointer)), diag_(&diag) {}

bool Reader::has(std::string_view key) const { return node_->is_object() && node_->contains(key); }

std::string Reader::child_pointer(std::string_view key) const {
  return pointer_ + "/" + escape_pointer_token(key);
}

void Reader::problem(std::string message) const { diag_->add(pointer_, std::move(message)); }

void Reader::problem(std::string_view key, std::string message) const {
  diag_->add(child_pointer(key), std::move(message));
}

void Reader::allow_only(std::initializer_list<std::string_view> known) const {
  if (!node_->is_object()) return;
  for (const auto& [key, value] : node_->items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string msg = "unknown key \"" + key + "\"";
    if (std::string guess = did_you_mean(key, known); !guess.empty()) {
      msg += " (did you mean \"" + guess + "\"?)";
    }
    diag_->add(child_pointer(key), msg);
  }
}

const Json* Reader::find(std::string_view key, bool required) const {
  if (!node_->is_object()) {
    problem("expected an object (got " + shown(*node_) + ")");
    return nullptr;
  }
  auto it = node_->find(key);
  if (it == node_->end()) {
    if (required) problem(key, "is required");
    return nullptr;
  }
  return &*it;
}

std::optional<std::int64_t> Reader::integer(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<std::int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // Range check first: casting an out-of-range double to an integer is undefined.
    if (d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
  }
  problem(key, "expected an integer (got " + shown(*v) + ")");
  return std::nullopt;
}

std::optional<double> Reader::number(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (!v) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  problem(key, "expected a number (got " + shown(*v) + ")");
  return std::nullopt;
}

std::optional<std::string> Reader::string(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  problem(key, "expected a string (got " + shown(*v) + ")");
  return std::nullopt;
}

std::optional<bool> Reader::boolean(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  problem(key, "expected true or false (got " + shown(*v) + ")");
  return std::nullopt;
}

namespace {

// Parses a unit string with `parse`; turns its InputError into a problem at the key.
template <class T, class Parse>
std::optional<T> unit_field(const Reader& r, std::string_view key, bool required, Parse parse,
                            const Json* v) {
  (void)required;
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    r.problem(key, "expected a unit string (got " + shown(*v) + ")");
    return std::nullopt;
  }
  try {
    return parse(v->get<std::string>(), "value");
  } catch (const InputError& e) {
    std::string msg = e.what();
    if (msg.rfind("value: ", 0) == 0) msg = msg.substr(7);
    r.problem(key, msg);
    return std::nullopt;
  }
}

}  // namespace

std::optional<Bytes> Reader::bytes(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (v && v->is_number_integer()) {
    if (v->get<std::int64_t>() >= 0) return Bytes{v->get<std::int64_t>()};
    problem(key, "must be >= 0 (got " + shown(*v) + ")");
    return std::nullopt;
  }
  return unit_field<Bytes>(*this, key, required, parse_bytes, v);
}

std::optional<BitsPerSecond> Reader::bandwidth(std::string_view key, bool required) const {
  return unit_field<BitsPerSecond>(*this, key, required, parse_bandwidth, find(key, required));
}

std::optional<Seconds> Reader::duration(std::string_view key, bool required) const {
  return unit_field<Seconds>(*this, key, required, parse_duration, find(key, required));
}

std::optional<Reader> Reader::object(std::string_view key, bool required) const {
  const Json* v = find(key, required);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    problem(key, "expected an object (got " + shown(*v) + ")");
    return std::nullopt;
  }
  return Reader(*v, child_pointer(key), *diag_);
}

void Reader::each(std::string_view key, const std::function<void(const Reader&)>& fn,
                  bool required) const {
  const Json* v = find(key, required);
  if (!v) return;
  if (!v->is_array()) {
    problem(key, "expected an array (got " + shown(*v) + ")");
    return;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    fn(Reader((*v)[i], child_pointer(key) + "/" + std::to_string(i), *diag_));
  }
}

}  // namespace kvshift::input
