// Safetensors parsing and fp32 conversion; see safetensors.hpp.
#include "backend/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit
constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;

int dtype_size(const std::string& dtype) {
  static const std::pair<const char*, int> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"U16", 2},
      {"U32", 4}, {"U64", 8}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& e, std::uint64_t data_size,
                       const std::string& source) {
  const std::string where = "tensor \"" + name + "\"";
  if (!e.is_object()) fail(source, where + ": header entry must be an object");
  for (const auto& [key, value] : e.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(source, where + ": unknown header key \"" + key + "\"");
    }
  }
  TensorInfo t;
  t.name = name;
  const auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) fail(source, where + ": \"dtype\" must be a string");
  t.dtype = dt->get<std::string>();
  const int size = dtype_size(t.dtype);
  if (size == 0) fail(source, where + ": unknown dtype \"" + t.dtype + "\"");
  const auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) fail(source, where + ": \"shape\" must be an array");
  std::int64_t elements = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) fail(source, where + ": shape entries must be integers >= 0");
    const std::uint64_t v = d.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(kMaxElements)) fail(source, where + ": shape too large");
    t.shape.push_back(static_cast<std::int64_t>(v));
    if (v != 0 && elements > kMaxElements / static_cast<std::int64_t>(v)) {
      fail(source, where + ": shape too large");
    }
    elements *= static_cast<std::int64_t>(v);
  }
  const auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    fail(source, where + ": \"data_offsets\" must be [begin, end] integers");
  }
  t.begin = (*off)[0].get<std::uint64_t>();
  t.end = (*off)[1].get<std::uint64_t>();
  if (t.begin > t.end || t.end > data_size) {
    fail(source, where + ": data_offsets [" + std::to_string(t.begin) + ", " +
                     std::to_string(t.end) + "] outside the " + std::to_string(data_size) +
                     "-byte data section (truncated file?)");
  }
  const std::uint64_t want =
      static_cast<std::uint64_t>(elements) * static_cast<std::uint64_t>(size);
  if (t.end - t.begin != want) {
    fail(source, where + ": shape " + shape_text(t.shape) + " of " + t.dtype + " needs " +
                     std::to_string(want) + " bytes but data_offsets span " +
                     std::to_string(t.end - t.begin));
  }
  return t;
}

}  // namespace

std::int64_t TensorInfo::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void append_raw(std::string& out, const void* value, std::size_t size) {
  out.append(static_cast<const char*>(value), size);
}

std::string safetensors_image(const std::vector<RawTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t len = text.size();
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((len >> (8 * b)) & 0xff));
  out += text;
  for (const RawTensor& t : tensors) out += t.bytes;
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<TensorInfo> parse_safetensors_header(std::span<const std::uint8_t> bytes,
                                                 const std::string& source,
                                                 std::map<std::string, std::string>* metadata) {
  if (bytes.size() < 8) fail(source, "too short for a safetensors header (truncated file?)");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    fail(source, "header length " + std::to_string(n) + " exceeds the file (" +
                     std::to_string(bytes.size()) + " bytes; truncated or not safetensors)");
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  const nlohmann::json header = nlohmann::json::parse(text, text + n, nullptr, false);
  if (header.is_discarded()) fail(source, "header is not valid JSON");
  if (!header.is_object()) fail(source, "header must be a JSON object");
  const std::uint64_t data_size = bytes.size() - 8 - n;
  std::vector<TensorInfo> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(source, "\"__metadata__\" must be an object");
      if (metadata) {
        for (const auto& [key, value] : entry.items()) {
          if (value.is_string()) (*metadata)[key] = value.get<std::string>();
        }
      }
      continue;
    }
    out.push_back(parse_entry(name, entry, data_size, source));
  }
  std::vector<const TensorInfo*> order;
  for (const auto& t : out) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (order[i]->begin < order[i - 1]->end) {
      fail(source, "tensors \"" + order[i - 1]->name + "\" and \"" + order[i]->name +
                       "\" overlap in the data section");
    }
  }
  return out;
}

void convert_to_f32(std::span<const std::uint8_t> raw, const std::string& dtype, float* out,
                    std::int64_t count, const std::string& what) {
  const int size = dtype_size(dtype);
  if (dtype != "F32" && dtype != "F16" && dtype != "BF16") {
    throw InputError(what + ": unsupported dtype \"" + dtype + "\" (supported: F32, F16, BF16)");
  }
  if (count < 0 || raw.size() != static_cast<std::uint64_t>(count) * size) {
    throw InputError(what + ": byte count does not match the element count");
  }
  if (dtype == "F32") {
    std::memcpy(out, raw.data(), raw.size());
    return;
  }
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint16_t v;
    std::memcpy(&v, raw.data() + 2 * i, 2);
    out[i] = dtype == "F16" ? half_to_float(v)
                            : std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16);
  }
}

struct SafetensorsFile::Storage {
  std::vector<std::uint8_t> copy;
  const std::uint8_t* map = nullptr;
  std::size_t map_size = 0;
  ~Storage() {
    if (map) ::munmap(const_cast<std::uint8_t*>(map), map_size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  auto storage = std::make_shared<Storage>();
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw InputError(path + ": cannot memory-map (" + std::strerror(errno) + ")");
    }
    storage->map = static_cast<const std::uint8_t*>(p);
    storage->map_size = size;
  }
  ::close(fd);
  SafetensorsFile f;
  const std::span<const std::uint8_t> all(storage->map, size);
  f.tensors_ = parse_safetensors_header(all, path, &f.metadata_);
  std::uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  f.data_ = all.subspan(8 + n);
  f.source_ = path;
  f.storage_ = std::move(storage);
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const std::uint8_t> bytes,
                                            std::string source) {
  auto storage = std::make_shared<Storage>();
  storage->copy.assign(bytes.begin(), bytes.end());
  SafetensorsFile f;
  const std::span<const std::uint8_t> all(storage->copy);
  f.tensors_ = parse_safetensors_header(all, source, &f.metadata_);
  std::uint64_t n = 0;
  std::memcpy(&n, all.data(), 8);
  f.data_ = all.subspan(8 + n);
  f.source_ = std::move(source);
  f.storage_ = std::move(storage);
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Matrix SafetensorsFile::read(const std::string& name,
                             const std::vector<std::int64_t>& expected) const {
  const TensorInfo* t = find(name);
  const std::string what = source_ + ": tensor \"" + name + "\"";
  if (!t) throw InputError(what + " is missing (expected shape " + shape_text(expected) + ")");
  if (t->shape != expected) {
    throw InputError(what + ": expected shape " + shape_text(expected) + ", found " +
                     shape_text(t->shape));
  }
  // 1-D tensors become one row; N-D tensors [d0, d1, ...] become [d0, d1·...].
  const std::int64_t rows = expected.size() <= 1 ? 1 : expected.front();
  const std::int64_t cols = rows == 0 ? 0 : t->elements() / rows;
  Matrix m(rows, cols);
  convert_to_f32(data_.subspan(t->begin, t->end - t->begin), t->dtype, m.data(), t->elements(),
                 what);
  return m;
}

Vector SafetensorsFile::read_vector(const std::string& name, std::int64_t size) const {
  const Matrix m = read(name, {size});
  return Eigen::Map<const Vector>(m.data(), size);
}

}  // namespace kvshift::backend
