// Safetensors reader: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}} and the raw tensor bytes. The file is
// memory-mapped; every header field is checked against the file before a byte
// is read (offsets inside the data, byte count = elements x dtype size, no
// overlaps), so a truncated or corrupt file is an InputError, never an
// out-of-bounds read. Supported dtypes: F32, F16, BF16; others are rejected
// when a tensor of that dtype is read, naming it. safetensors_image writes an
// image of raw tensors (any dtype) for the callers that store files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.hpp"
#include "cost_model/model_spec.hpp"

namespace kvshift::backend {

/// One tensor's header entry.
struct TensorInfo {
  std::string name;
  std::string dtype;  ///< as written: "F32", "F16", "BF16", "I64", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< byte offset inside the data section
  std::uint64_t end = 0;
  std::int64_t elements() const;
};

/// Parses and validates the header of a safetensors image; throws InputError naming `source`.
/// The string entries of "__metadata__" go to `metadata` when given.
std::vector<TensorInfo> parse_safetensors_header(
    std::span<const std::uint8_t> bytes, const std::string& source,
    std::map<std::string, std::string>* metadata = nullptr);

/// Converts `count` little-endian elements of safetensors dtype `dtype` to fp32.
void convert_to_f32(std::span<const std::uint8_t> raw, const std::string& dtype, float* out,
                    std::int64_t count, const std::string& what);

/// A validated safetensors file (memory-mapped) or in-memory image.
class SafetensorsFile {
 public:
  /// Memory-maps and validates `path`.
  static SafetensorsFile open(const std::string& path);
  /// Validates an in-memory image (copied); `source` names it in messages.
  static SafetensorsFile from_bytes(std::span<const std::uint8_t> bytes, std::string source);

  const std::string& source() const { return source_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  /// The header's "__metadata__" (string values only, as the format defines).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The entry named `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
  /// Reads `name` as fp32, checking its shape equals `expected`; InputError names the
  /// tensor, the expected and the found shape, or the unsupported dtype.
  Matrix read(const std::string& name, const std::vector<std::int64_t>& expected) const;
  /// Reads a 1-D tensor of `size` elements.
  Vector read_vector(const std::string& name, std::int64_t size) const;

 private:
  struct Storage;
  std::shared_ptr<const Storage> storage_;
  std::span<const std::uint8_t> data_;  // the data section
  std::string source_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write: little-endian bytes already laid out row-major.
struct RawTensor {
  std::string name, dtype;  ///< dtype as the format spells it: "F32", "F16", "I64", "I32"
  std::vector<std::int64_t> shape;
  std::string bytes;
};

/// Appends `size` bytes of `value` as they sit in memory (the supported hosts are
/// little-endian, as the reader assumes).
void append_raw(std::string& out, const void* value, std::size_t size);

/// A safetensors image of `tensors` (in order) with `metadata` (string values) in
/// "__metadata__"; the header is padded to 8 bytes as the format recommends.
std::string safetensors_image(const std::vector<RawTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

/// "[576, 192]".
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace kvshift::backend
