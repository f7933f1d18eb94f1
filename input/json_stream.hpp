// Streaming read of a large JSON file whose bulk is one top-level array (a
// flows file's "transfers"): nlohmann's SAX parser builds a small DOM for one
// element at a time, so memory stays bounded by the largest element, not by the
// file. Two calls, two passes over the file: read_json_skeleton() gives the
// document with that array's elements left out (an empty array stands in), so
// the rest (the topology) can be read first wherever it sits in the file;
// stream_json_array() then hands each element to a callback with its index.
// Left out: arrays nested deeper than the top level are read whole.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "input/json_reader.hpp"

namespace kvshift::input {

/// The document in `path` without the elements of its top-level array `key` (when that
/// value is an array; any other value is kept). A missing or unreadable file or a syntax
/// error is an InputError naming `path` (and the byte offset). `elements`, when given, gets
/// the number of elements left out (so a reader can reserve room for them).
Json read_json_skeleton(const std::string& path, std::string_view key,
                        std::size_t* elements = nullptr);

/// Calls `fn(element, index)` for each element of the top-level array `key` of `path`, in
/// order, each element's DOM alive only during its call. Nothing happens when the root is
/// not an object or `key` is not an array.
void stream_json_array(const std::string& path, std::string_view key,
                       const std::function<void(const Json&, std::size_t)>& fn);

}  // namespace kvshift::input
