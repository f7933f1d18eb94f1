// Fields: one object of a summary.json being read back, typed. Every accessor names the key
// it misses or finds mistyped by its JSON pointer in the file (InputError), so a hand-edited
// or truncated summary is refused with the field named, never read as zero.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/input_error.hpp"

namespace kvshift::reports {

class Fields {
 public:
  Fields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) throw InputError(where_ + ": expected an object (got " + j_.dump() + ")");
  }
  bool has(const char* key) const { return j_.contains(key); }
  Fields object(const std::string& key) const { return Fields(at(key), where_ + "/" + key); }
  const nlohmann::json& array(const char* key) const {
    if (!at(key).is_array()) bad(key, "an array");
    return at(key);
  }
  std::int64_t integer(const char* key) const {
    if (!at(key).is_number_integer()) bad(key, "an integer");
    return at(key).get<std::int64_t>();
  }
  double number(const char* key) const {
    if (!at(key).is_number()) bad(key, "a number");
    return at(key).get<double>();
  }
  std::string text(const char* key) const {
    if (!at(key).is_string()) bad(key, "a string");
    return at(key).get<std::string>();
  }
  bool flag(const char* key) const {
    if (!at(key).is_boolean()) bad(key, "true or false");
    return at(key).get<bool>();
  }
  std::map<std::string, std::int64_t> counts(const char* key) const {
    const Fields f = object(key);
    std::map<std::string, std::int64_t> out;
    for (const auto& [name, v] : f.j_.items()) out[name] = f.integer(name.c_str());
    return out;
  }
  std::optional<std::int64_t> optional_integer(const char* key) const {
    return has(key) ? std::optional(integer(key)) : std::nullopt;
  }
  /// A number that may be null (unknown); the key must be there.
  std::optional<double> optional_number(const char* key) const {
    return at(key).is_null() ? std::nullopt : std::optional(number(key));
  }
  std::vector<double> numbers(const char* key) const {
    std::vector<double> out;
    for (const nlohmann::json& v : array(key)) {
      if (!v.is_number()) bad(key, "an array of numbers");
      out.push_back(v.get<double>());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& why) const { throw InputError(where_ + ": " + why); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& [key, v] : j_.items()) out.push_back(key);
    return out;
  }

 private:
  const nlohmann::json& at(const std::string& key) const {
    if (!j_.contains(key)) throw InputError(where_ + "/" + key + ": missing from the summary");
    return j_[key];
  }
  [[noreturn]] void bad(const char* key, const char* expected) const {
    throw InputError(where_ + "/" + key + ": expected " + expected + " (got " + at(key).dump() +
                     ")");
  }
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace kvshift::reports
