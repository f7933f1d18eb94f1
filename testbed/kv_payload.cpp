// Serialisation of KV rows to little-endian fp32 / fp16 and back.
#include "testbed/kv_payload.hpp"

#include <Eigen/Core>
#ifdef __F16C__
#include <immintrin.h>
#endif
#include <bit>
#include <cstring>
#include <stdexcept>

namespace kvshift::testbed {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");
static_assert(sizeof(Eigen::half) == 2, "fp16 on the wire is two bytes");

std::size_t element_bytes(WireDType d) { return d == WireDType::kF16 ? 2 : 4; }

void check_dtype(WireDType d) {
  if (d != WireDType::kF32 && d != WireDType::kF16) {
    throw std::invalid_argument("KV payload: dtype must be f32 or f16");
  }
}

/// fp32 -> fp16, round to nearest even, as Eigen::half(float) does one by one; eight at a
/// time with F16C where the compiler may use it (bit-identical: a test checks it).
void to_half(const float* v, std::uint8_t* out, std::size_t n) {
  std::size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
#endif
  for (; i < n; ++i) {
    const auto bits = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(v[i]));
    std::memcpy(out + 2 * i, &bits, 2);
  }
}

void from_half(const std::uint8_t* in, float* v, std::size_t n) {
  std::size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(v + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    v[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
  }
}

void put_floats(std::vector<std::uint8_t>& out, const float* v, std::size_t n, WireDType d) {
  const std::size_t at = out.size();
  out.resize(at + n * element_bytes(d));
  if (d == WireDType::kF32) {
    std::memcpy(out.data() + at, v, n * 4);
  } else {
    to_half(v, out.data() + at, n);
  }
}

void get_floats(const std::uint8_t* in, float* v, std::size_t n, WireDType d) {
  if (d == WireDType::kF32) {
    std::memcpy(v, in, n * 4);
  } else {
    from_half(in, v, n);
  }
}

void put_head_rows(std::vector<std::uint8_t>& out, const backend::Matrix& m,
                   const std::vector<std::int64_t>& rows, int h, int head_dim, WireDType d) {
  for (std::int64_t r : rows) {
    put_floats(out, m.row(static_cast<Eigen::Index>(r)).data() + std::int64_t{h} * head_dim,
               static_cast<std::size_t>(head_dim), d);
  }
}

Segment segment(std::size_t begin, std::size_t end, int layer, std::int64_t tokens, WireDType d,
                std::int64_t first_token = 0) {
  return {begin,
          end - begin,
          static_cast<std::uint16_t>(layer),
          static_cast<std::uint16_t>(layer + 1),
          static_cast<std::uint32_t>(first_token),
          static_cast<std::uint32_t>(tokens),
          d};
}

}  // namespace

KvPayload layers_payload(const backend::KvCache& cache, const std::vector<int>& layers,
                         WireDType dtype, std::int64_t first_token) {
  check_dtype(dtype);
  if (first_token < 0 || first_token > cache.tokens()) {
    throw std::invalid_argument("layers_payload: first token outside the cache");
  }
  KvPayload p;
  for (int l : layers) {
    const std::size_t begin = p.bytes.size();
    const auto& k = cache.k.at(static_cast<std::size_t>(l));
    const auto& v = cache.v.at(static_cast<std::size_t>(l));
    // Rows are tokens (row-major): the rows from first_token on are one contiguous run.
    const auto skip = static_cast<std::size_t>(first_token * k.cols());
    put_floats(p.bytes, k.data() + skip, static_cast<std::size_t>(k.size()) - skip, dtype);
    put_floats(p.bytes, v.data() + skip, static_cast<std::size_t>(v.size()) - skip, dtype);
    p.segments.push_back(segment(begin, p.bytes.size(), l, cache.tokens(), dtype, first_token));
  }
  return p;
}

KvPayload kept_tokens_payload(const backend::KvCache& cache,
                              const std::vector<std::vector<std::int64_t>>& kept, int kv_heads,
                              int head_dim, WireDType dtype) {
  check_dtype(dtype);
  if (kept.size() != cache.k.size() * static_cast<std::size_t>(kv_heads)) {
    throw std::invalid_argument("kept_tokens_payload: one kept list per layer and KV head");
  }
  KvPayload p;
  for (std::size_t l = 0; l < cache.k.size(); ++l) {
    const std::size_t begin = p.bytes.size();
    for (int h = 0; h < kv_heads; ++h) {
      const auto& rows = kept[l * static_cast<std::size_t>(kv_heads) + static_cast<std::size_t>(h)];
      for (std::int64_t r : rows) {
        const auto id = static_cast<std::int32_t>(r);
        const std::size_t at = p.bytes.size();
        p.bytes.resize(at + 4);
        std::memcpy(p.bytes.data() + at, &id, 4);
      }
      put_head_rows(p.bytes, cache.k[l], rows, h, head_dim, dtype);
      put_head_rows(p.bytes, cache.v[l], rows, h, head_dim, dtype);
    }
    p.segments.push_back(
        segment(begin, p.bytes.size(), static_cast<int>(l), cache.tokens(), dtype));
  }
  return p;
}

KvPayload token_ids_payload(std::span<const std::int32_t> tokens) {
  KvPayload p;
  p.bytes.resize(tokens.size() * 4);
  if (!tokens.empty()) std::memcpy(p.bytes.data(), tokens.data(), p.bytes.size());
  p.segments.push_back(
      {0, p.bytes.size(), 0, 0, 0, static_cast<std::uint32_t>(tokens.size()), WireDType::kI32});
  return p;
}

backend::KvCache decode_layers(std::span<const std::uint8_t> bytes,
                               std::span<const Segment> segments, int layers, int width) {
  backend::KvCache c = backend::KvCache::empty(layers, width);
  for (const Segment& s : segments) {
    check_dtype(s.dtype);
    const std::int64_t tokens = s.token_end - s.token_begin;
    const std::size_t half = static_cast<std::size_t>(tokens * width);
    const int l = s.layer_begin;
    if (s.layer_end != l + 1 || l >= layers || s.offset + s.length > bytes.size() ||
        s.length != 2 * half * element_bytes(s.dtype)) {
      throw std::invalid_argument("decode_layers: a segment does not fit the KV layout");
    }
    auto& k = c.k[static_cast<std::size_t>(l)];
    auto& v = c.v[static_cast<std::size_t>(l)];
    k.resize(tokens, width);
    v.resize(tokens, width);
    const std::uint8_t* at = bytes.data() + s.offset;
    get_floats(at, k.data(), half, s.dtype);
    get_floats(at + half * element_bytes(s.dtype), v.data(), half, s.dtype);
  }
  return c;
}

backend::KvCache decode_kept_tokens(std::span<const std::uint8_t> bytes,
                                    std::span<const Segment> segments, int layers, int kv_heads,
                                    int head_dim, std::int64_t tokens) {
  if (segments.size() != static_cast<std::size_t>(layers)) {
    throw std::invalid_argument("decode_kept_tokens: one segment per layer needed");
  }
  backend::KvCache c = backend::KvCache::empty(layers, std::int64_t{kv_heads} * head_dim);
  for (const Segment& s : segments) {
    check_dtype(s.dtype);
    const std::size_t e = element_bytes(s.dtype);
    const std::size_t per_token = 4 + 2 * static_cast<std::size_t>(head_dim) * e;
    const std::size_t n = s.length / (per_token * static_cast<std::size_t>(kv_heads));
    if (s.length != n * per_token * static_cast<std::size_t>(kv_heads) || s.layer_begin >= layers ||
        s.offset + s.length > bytes.size()) {
      throw std::invalid_argument("decode_kept_tokens: a segment does not fit the layout");
    }
    auto& k = c.k[s.layer_begin];
    auto& v = c.v[s.layer_begin];
    k.resize(static_cast<Eigen::Index>(n), kv_heads * head_dim);
    v.resize(static_cast<Eigen::Index>(n), kv_heads * head_dim);
    const std::uint8_t* at = bytes.data() + s.offset + 4 * n;  // past head 0's indices
    for (int h = 0; h < kv_heads; ++h) {
      for (auto* m : {&k, &v}) {
        for (std::size_t i = 0; i < n; ++i, at += head_dim * e) {
          get_floats(at, m->row(static_cast<Eigen::Index>(i)).data() + h * head_dim,
                     static_cast<std::size_t>(head_dim), s.dtype);
        }
      }
      at += 4 * n;  // the next head's indices (the compact cache keeps rows in index order)
    }
    c.evicted = tokens - static_cast<std::int64_t>(n);
  }
  return c;
}

std::vector<std::int32_t> decode_token_ids(std::span<const std::uint8_t> bytes) {
  if (bytes.size() % 4 != 0) throw std::invalid_argument("decode_token_ids: not whole int32s");
  std::vector<std::int32_t> ids(bytes.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), bytes.data(), bytes.size());
  return ids;
}

backend::KvCache round_trip(const backend::KvCache& cache, WireDType dtype) {
  std::vector<int> all(cache.k.size());
  for (std::size_t l = 0; l < all.size(); ++l) all[l] = static_cast<int>(l);
  const KvPayload p = layers_payload(cache, all, dtype);
  const int width = cache.k.empty() ? 0 : static_cast<int>(cache.k.front().cols());
  backend::KvCache out = decode_layers(p.bytes, p.segments, static_cast<int>(all.size()), width);
  out.evicted = cache.evicted;
  return out;
}

}  // namespace kvshift::testbed
