// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every
// testbed frame. Written here rather than taken from a library: the project
// depends on no CRC package. The software path is slicing-by-8 (eight 256-entry
// tables, ~8 bytes per step); where the compiler targets SSE4.2 the crc32
// instruction is used instead. Both give the same value (tested), and the
// standard check value: crc32c("123456789") = 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvshift::testbed {

/// CRC32C of `data`, continuing from `crc` (0 to start; pass a previous result to extend).
std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t crc = 0);

/// The portable slicing-by-8 path (what crc32c uses without SSE4.2).
std::uint32_t crc32c_software(std::span<const std::uint8_t> data, std::uint32_t crc = 0);

}  // namespace kvshift::testbed
