// JSON as a person reads it: indented by two like nlohmann's dump(2), except that an
// array of plain values (numbers, strings, booleans, null) stays on one line, so a
// series of 2,000 samples is one line of summary.json, not 2,000.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvshift::reports {

/// The text of `j`, ending in a newline.
std::string json_text(const nlohmann::json& j);

}  // namespace kvshift::reports
