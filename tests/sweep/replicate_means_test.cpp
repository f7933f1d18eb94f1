// Replicate means: sweep.csv folded over its /seed axis, with Student-t intervals.
#include "sweep/replicate_means.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "util/csv.hpp"

namespace kvshift::sweep {
namespace {

TEST(ReplicateMeans, MeanAndStudentTIntervalPerPointOfTheOtherAxes) {
  const std::string csv =
      "point,seed,/bw,/seed,a.p99_s,a.count\n"
      "0,1,1Gbps,1,1.0,10\n"
      "1,2,1Gbps,2,2.0,12\n"
      "2,3,1Gbps,3,3.0,\n"
      "3,1,\"10,Gbps\",1,0.5,4\n"
      "4,2,\"10,Gbps\",2,0.5,4\n";
  const std::string out = replicate_means_csv(csv);
  std::vector<std::string> lines;
  for (std::size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(out.substr(at, nl - at));
  }
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0],
            "/bw,replicates,a.p99_s,a.p99_s.ci95,a.p99_s.n,a.count,a.count.ci95,a.count.n");
  const auto row = util::csv_fields(lines[1]);
  EXPECT_EQ(row[0], "1Gbps");
  EXPECT_EQ(row[1], "3");
  EXPECT_DOUBLE_EQ(std::stod(row[2]), 2.0);
  // sd = 1, n = 3: half-width t(0.975, 2) · 1 / sqrt(3)
  EXPECT_NEAR(std::stod(row[3]), 4.303 / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(row[4], "3");
  EXPECT_DOUBLE_EQ(std::stod(row[5]), 11.0) << "an empty cell is left out of the mean";
  EXPECT_EQ(row[7], "2");
  const auto tens = util::csv_fields(lines[2]);
  EXPECT_EQ(tens[0], "10,Gbps") << "labels with commas survive the round trip";
  EXPECT_DOUBLE_EQ(std::stod(tens[3]), 0.0) << "identical replicates: a zero-width interval";
}

TEST(ReplicateMeans, TQuantilesAndBadInput) {
  EXPECT_DOUBLE_EQ(t95(1), 12.706);
  EXPECT_DOUBLE_EQ(t95(30), 2.042);
  EXPECT_NEAR(t95(1000), 1.962, 0.001);
  EXPECT_THROW(t95(0), std::invalid_argument);
  EXPECT_THROW(replicate_means_csv("point,seed,/bw,a.x\n0,1,1Gbps,3\n"), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::sweep
