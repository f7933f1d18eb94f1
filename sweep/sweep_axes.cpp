// Sweep axes: parsing `--set`, applying JSON pointers with `*`, and the
// cartesian product of the axes (see sweep_axes.hpp).
#include "sweep/sweep_axes.hpp"

#include "cost_model/input_error.hpp"

namespace kvshift::sweep {
namespace {

using nlohmann::json;

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// Splits a value list at commas outside brackets, braces and quotes, so a
// JSON array or object can be one value: /policies/strategies=["a","b"],["c"].
std::vector<std::string> split_values(std::string_view text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 1 < text.size())
        parts.back() += text[i++];
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.emplace_back();
      continue;
    }
    parts.back() += c;
  }
  return parts;
}

// RFC 6901 unescaping of one reference token.
std::string unescape(const std::string& token) {
  std::string out;
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

bool is_index(const std::string& token) {
  if (token.empty() || token.size() > 9) return false;
  if (token.size() > 1 && token[0] == '0') return false;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

struct Walk {
  std::string_view pointer;
  const std::vector<std::string>& tokens;
  const json& value;
  std::size_t applied = 0;
  std::string missing;  ///< the first prefix that reached nothing, for the message

  void note_missing(std::size_t depth) {
    if (!missing.empty()) return;
    std::string prefix;
    for (std::size_t i = 0; i <= depth; ++i) prefix += "/" + tokens[i];
    missing = prefix;
  }

  void visit(json& node, std::size_t depth) {
    const std::string& raw = tokens[depth];
    const bool last = depth + 1 == tokens.size();
    if (raw == "*") {
      if (!node.is_array() && !node.is_object()) return note_missing(depth);
      for (auto& child : node) step(child, depth);
      if (node.empty()) note_missing(depth);
      return;
    }
    const std::string key = unescape(raw);
    if (node.is_object()) {
      if (last) {
        node[key] = value;
        ++applied;
        return;
      }
      auto it = node.find(key);
      if (it == node.end()) return note_missing(depth);
      return visit(*it, depth + 1);
    }
    if (node.is_array() && is_index(key) && std::stoul(key) < node.size()) {
      return step(node[std::stoul(key)], depth);
    }
    note_missing(depth);
  }

  void step(json& child, std::size_t depth) {
    if (depth + 1 == tokens.size()) {
      child = value;
      ++applied;
    } else {
      visit(child, depth + 1);
    }
  }
};

}  // namespace

json parse_value(std::string_view text) {
  json v = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return json(std::string(text));
  return v;
}

Axis parse_axis(std::string_view text, std::string_view flag) {
  const std::size_t eq = text.find('=');
  const std::string f(flag);
  if (eq == std::string_view::npos) {
    throw InputError(f + ": expected POINTER=v1,v2,... (got \"" + std::string(text) + "\")");
  }
  Axis axis;
  axis.pointer = std::string(text.substr(0, eq));
  if (axis.pointer.empty() || axis.pointer[0] != '/') {
    throw InputError(f + ": the pointer must start with '/' like /cluster/star/bandwidth (got \"" +
                     axis.pointer + "\")");
  }
  for (std::string& label : split_values(text.substr(eq + 1))) {
    if (label.empty()) {
      throw InputError(f + " " + axis.pointer + ": empty value in \"" + std::string(text) + "\"");
    }
    axis.values.push_back(parse_value(label));
    axis.labels.push_back(std::move(label));
  }
  return axis;
}

std::size_t apply_pointer(json& doc, std::string_view pointer, const json& value) {
  if (pointer.empty() || pointer[0] != '/') {
    throw InputError(std::string(pointer) + ": a JSON pointer must start with '/'");
  }
  const std::vector<std::string> tokens = split(pointer.substr(1), '/');
  Walk walk{pointer, tokens, value, 0, {}};
  walk.visit(doc, 0);
  if (walk.applied == 0) {
    throw InputError(std::string(pointer) + ": matches nothing in the scenario (" +
                     (walk.missing.empty() ? std::string("no such location")
                                           : walk.missing + " does not exist or is empty") +
                     ")");
  }
  return walk.applied;
}

std::uint64_t point_count(const std::vector<Axis>& axes) {
  std::uint64_t n = 1;
  for (const Axis& a : axes) {
    n *= a.values.size();
    if (n > (1ULL << 40)) throw InputError("--set: more than 2^40 points; sweep fewer values");
  }
  return n;
}

std::vector<std::size_t> point_indices(const std::vector<Axis>& axes, std::uint64_t k) {
  std::vector<std::size_t> idx(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    idx[i] = static_cast<std::size_t>(k % axes[i].values.size());
    k /= axes[i].values.size();
  }
  return idx;
}

json point_document(const json& base, const std::vector<Axis>& axes, std::uint64_t k) {
  json doc = base;
  const std::vector<std::size_t> idx = point_indices(axes, k);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    apply_pointer(doc, axes[i].pointer, axes[i].values[idx[i]]);
  }
  return doc;
}

}  // namespace kvshift::sweep
