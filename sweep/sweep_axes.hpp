// Sweep axes: `--set POINTER=v1,v2,...` parsed into an axis, applied to a
// scenario's JSON document. A pointer is an RFC 6901 JSON pointer in which a
// `*` token stands for every element of an array (or every member of an
// object), so `/cluster/links/*/bandwidth` sets the bandwidth of every link.
// The final token may name a key its object does not have yet (the scenario
// loader then judges it, with a did-you-mean); every other token must exist,
// and a pointer that reaches nothing is an InputError. Values are read as JSON
// when they parse as JSON (4, 0.5, true, "text") and as strings otherwise
// ("10Gbps"). The points of a sweep are the cartesian product of its axes,
// the last axis varying fastest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kvshift::sweep {

/// One swept knob: where it is and the values it takes.
struct Axis {
  std::string pointer;                 ///< "/cluster/links/*/bandwidth"
  std::vector<nlohmann::json> values;  ///< in the order given
  std::vector<std::string> labels;     ///< the values as the user wrote them
};

/// Parses "POINTER=v1,v2,..."; throws InputError naming `flag` when malformed.
Axis parse_axis(std::string_view text, std::string_view flag = "--set");

/// Reads one value as written on the command line: JSON if it parses, else a string.
nlohmann::json parse_value(std::string_view text);

/// Sets every location `pointer` reaches in `doc` to `value`; returns how many.
/// Throws InputError (naming the pointer and the missing part) when it reaches none.
std::size_t apply_pointer(nlohmann::json& doc, std::string_view pointer,
                          const nlohmann::json& value);

/// Number of points of the cartesian product (throws InputError above 2^40).
std::uint64_t point_count(const std::vector<Axis>& axes);

/// Per-axis value indices of point `k` (last axis fastest).
std::vector<std::size_t> point_indices(const std::vector<Axis>& axes, std::uint64_t k);

/// The scenario document of point `k`: `base` with every axis value applied.
nlohmann::json point_document(const nlohmann::json& base, const std::vector<Axis>& axes,
                              std::uint64_t k);

}  // namespace kvshift::sweep
