#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "cost_model/units.hpp"

namespace kvshift {
namespace {

TEST(Units, ParsesDecimalAndBinarySizes) {
  EXPECT_EQ(parse_bytes("4096B", "f").count, 4096);
  EXPECT_EQ(parse_bytes("512MB", "f").count, 512'000'000);
  EXPECT_EQ(parse_bytes("2GiB", "f").count, 2LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1.5KiB", "f").count, 1536);
  EXPECT_EQ(parse_bytes("80 GiB", "f").count, 80LL << 30);
}

TEST(Units, ParsesBandwidthInBitsAndBytes) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Mbps", "f").value, 100e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("10Gbps", "f").value, 10e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("12.5MB/s", "f").value, 100e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("25GB/s", "f").value, 200e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e3bps", "f").value, 1000.0);
}

TEST(Units, ParsesDurations) {
  EXPECT_DOUBLE_EQ(parse_duration("20ms", "f").value, 0.02);
  EXPECT_DOUBLE_EQ(parse_duration("50us", "f").value, 50e-6);
  EXPECT_DOUBLE_EQ(parse_duration("1.5s", "f").value, 1.5);
  EXPECT_DOUBLE_EQ(parse_duration("2min", "f").value, 120.0);
  EXPECT_DOUBLE_EQ(parse_duration("100ns", "f").value, 100e-9);
}

TEST(Units, RejectsMalformedValuesAndNamesTheField) {
  for (const char* bad : {"", "Mbps", "100", "100 mbps", "100Mb", "-5Mbps", "1..2Gbps", "10 Gbps ",
                          "0x10Gbps", "1e400Gbps"}) {
    try {
      parse_bandwidth(bad, "--bandwidth");
      FAIL() << "accepted \"" << bad << "\"";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("--bandwidth"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("\"") + bad + "\""), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(parse_bytes("12GB/s", "f"), InputError);
  EXPECT_THROW(parse_duration("20", "f"), InputError);
  EXPECT_THROW(parse_duration("20 m", "f"), InputError);
}

TEST(Units, FormatsForPeople) {
  EXPECT_EQ(format_mib(Bytes{2 * 1048576}), "2.000 MiB");
  EXPECT_EQ(format_ms(Seconds{0.5033164}), "503.316 ms");
  EXPECT_EQ(format_bandwidth(BitsPerSecond{100e6}), "100.000 Mbps");
  EXPECT_EQ(format_bandwidth(BitsPerSecond{1.25e9}), "1.250 Gbps");
}

TEST(Units, FormatsOneNumberAsPrintfDoesAtAnyLength) {
  EXPECT_EQ(format_number("%.3f", 2.0 / 3.0), "0.667");
  EXPECT_EQ(format_number("%.1f %%", 6.66), "6.7 %");
  EXPECT_EQ(format_g(0.05), "0.05");
  EXPECT_EQ(format_g(1e9), "1e+09");
  // Longer than the 64-character first try: printed again whole, never cut.
  const std::string big = format_number("%.2f", 1e100);
  EXPECT_EQ(big.size(), 101u + 3u);
  EXPECT_EQ(big.substr(0, 2), "10");
  EXPECT_EQ(big.substr(big.size() - 3), ".00");
}

TEST(Units, SerialisationTimeIsBitsOverRate) {
  EXPECT_DOUBLE_EQ(serialisation_time(Bytes{12'500'000}, BitsPerSecond{100e6}).value, 1.0);
}

}  // namespace
}  // namespace kvshift
