#include "reports/json_text.hpp"

#include <algorithm>

namespace kvshift::reports {
namespace {

using nlohmann::json;

bool flat(const json& j) {
  return j.is_array() &&
         std::none_of(j.begin(), j.end(), [](const json& e) { return e.is_structured(); });
}

void write(std::string& out, const json& j, int depth) {
  const std::string pad(2 * static_cast<std::size_t>(depth + 1), ' ');
  if (j.is_object() && !j.empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      out += first ? "" : ",\n";
      first = false;
      out += pad + json(key).dump() + ": ";
      write(out, value, depth + 1);
    }
    out += "\n" + std::string(pad.size() - 2, ' ') + "}";
  } else if (j.is_array() && !j.empty() && !flat(j)) {
    out += "[\n";
    for (std::size_t i = 0; i < j.size(); ++i) {
      out += (i ? ",\n" : "") + pad;
      write(out, j[i], depth + 1);
    }
    out += "\n" + std::string(pad.size() - 2, ' ') + "]";
  } else if (j.is_array()) {
    out += "[";
    for (std::size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + j[i].dump();
    out += "]";
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string json_text(const json& j) {
  std::string out;
  write(out, j, 0);
  return out + "\n";
}

}  // namespace kvshift::reports
