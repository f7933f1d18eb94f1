// `kvshift sweep` under `mpirun -np 2` equals the single-process sweep row for
// row (and summary for summary); more ranks than points warns and finishes.
// Every launch runs under `timeout`, so a hung rank fails the test instead of
// hanging it. Root in CI needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/sweep/sweep_test_util.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::sweep {
namespace {

using kvshift::testing::run_command;
using testing::read_file;

const char* const kMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string mpirun(int ranks) {
  return std::string(kMpiEnv) + "timeout 180 mpirun --oversubscribe --allow-run-as-root -np " +
         std::to_string(ranks) + " " + kvshift::testing::kvshift_exe() + " ";
}

TEST(SweepMpi, TwoRanksMatchTheSingleProcessRunRowForRow) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  const auto single = testing::scratch("mpi-single"), multi = testing::scratch("mpi-two");
  const auto s =
      run_command(kvshift::testing::kvshift_exe() + " sweep " + testing::tiny_scenario() +
                  " --set /cluster/star/bandwidth=1Gbps,25Gbps --set "
                  "'/policies/strategies=[\"full_kv\"],[\"risk_kv\"]'"
                  " --jobs 1 --no-report --quiet --out " +
                  single.string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto m = run_command(mpirun(2) + "sweep " + testing::tiny_scenario() +
                             " --set /cluster/star/bandwidth=1Gbps,25Gbps --set "
                             "'/policies/strategies=[\"full_kv\"],[\"risk_kv\"]'"
                             " --jobs 1 --no-report --out " +
                             multi.string());
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_NE(m.out.find("on 2 rank(s)"), std::string::npos) << m.out;
  const std::string csv = read_file(single / "sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_EQ(read_file(multi / "sweep.csv"), csv);
  for (int k = 0; k < 4; ++k) {
    const auto p = std::filesystem::path("points") / std::to_string(k) / "summary.json";
    EXPECT_EQ(read_file(multi / p), read_file(single / p)) << "point " << k;
  }
}

TEST(SweepMpi, MoreRanksThanPointsWarnsAndFinishes) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  const auto dir = testing::scratch("mpi-three");
  const auto m = run_command(
      mpirun(3) + "sweep " + testing::tiny_scenario() +
      " --set /cluster/star/bandwidth=1Gbps,25Gbps --set '/policies/strategies=[\"full_kv\"]'"
      " --jobs 1 --no-report --out " +
      dir.string());
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_NE(m.err.find("warning: 3 MPI ranks for 2 points to simulate"), std::string::npos)
      << m.err;
  const std::string csv = read_file(dir / "sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
}

}  // namespace
}  // namespace kvshift::sweep
