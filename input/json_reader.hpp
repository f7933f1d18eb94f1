// Reader: typed, pointer-carrying access to a JSON document. Every problem is
// recorded as "/json/pointer: what was expected (got ...)" in a Diagnostics
// list instead of stopping at the first, so a user sees all mistakes at once.
// Unknown keys are problems too (with a did-you-mean).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/units.hpp"

namespace kvshift::input {

using Json = nlohmann::json;

/// Problems found while reading one document.
class Diagnostics {
 public:
  void add(std::string pointer, std::string message);
  bool empty() const { return items_.empty(); }
  const std::vector<std::string>& items() const { return items_; }
  /// Throws InputError listing every problem, each prefixed with `source` ("file.json").
  void throw_if_any(std::string_view source) const;

 private:
  std::vector<std::string> items_;
};

/// Parses JSON text; a syntax error becomes an InputError naming `source` and the byte offset.
Json parse_json_text(std::string_view text, std::string_view source);
/// Reads and parses a file; a missing or unreadable file is an InputError naming it.
Json read_json_file(const std::string& path);

class Reader {
 public:
  Reader(const Json& node, std::string pointer, Diagnostics& diag);

  const Json& node() const { return *node_; }
  const std::string& pointer() const { return pointer_; }
  Diagnostics& diagnostics() const { return *diag_; }
  bool has(std::string_view key) const;
  /// Records an unknown-key problem for every key not in `known`.
  void allow_only(std::initializer_list<std::string_view> known) const;
  /// Records a problem at this node or at `key` below it.
  void problem(std::string message) const;
  void problem(std::string_view key, std::string message) const;

  std::optional<std::int64_t> integer(std::string_view key, bool required = true) const;
  std::optional<double> number(std::string_view key, bool required = true) const;
  std::optional<std::string> string(std::string_view key, bool required = true) const;
  std::optional<bool> boolean(std::string_view key, bool required = true) const;
  std::optional<Bytes> bytes(std::string_view key, bool required = true) const;
  std::optional<BitsPerSecond> bandwidth(std::string_view key, bool required = true) const;
  std::optional<Seconds> duration(std::string_view key, bool required = true) const;

  /// The object at `key`; records a problem and returns nullopt if absent (when required) or not an
  /// object.
  std::optional<Reader> object(std::string_view key, bool required = true) const;
  /// Calls `fn` with a Reader for each element of the array at `key`.
  void each(std::string_view key, const std::function<void(const Reader&)>& fn,
            bool required = true) const;

 private:
  const Json* find(std::string_view key, bool required) const;
  std::string child_pointer(std::string_view key) const;

  const Json* node_;
  std::string pointer_;
  Diagnostics* diag_;
};

/// The known name closest to `word` (edit distance ≤ 2), or empty.
std::string did_you_mean(std::string_view word, std::initializer_list<std::string_view> known);

}  // namespace kvshift::input
