// A rank that dies mid-sweep loses only its running point: every point a rank
// finished is already on disk (points/<k>/summary.json, written atomically as it
// finishes), so `kvshift sweep --resume DIR` simulates only the missing points
// and the final sweep.csv equals an uninterrupted run's byte for byte.
// The test starts `mpirun -np 2` in its own process group, waits for the first
// finished point, SIGKILLs rank 1 (found by OMPI_COMM_WORLD_RANK among
// mpirun's children), and reaps the group; every wait has a deadline and the
// group is killed on any exit path, so no process outlives the test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "tests/sweep/sweep_test_util.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::sweep {
namespace {

using kvshift::testing::run_command;
using testing::read_file;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const char* const kAxes =
    " --set /duration=1500s --set /workload/rate=6,8,10,12,14,16 --set "
    "'/policies/strategies=[\"full_kv\"],[\"risk_kv\"]'";
constexpr int kPoints = 12;

/// mpirun and its ranks in their own process group, killed and reaped on destruction.
class Launched {
 public:
  explicit Launched(const std::string& cmd, const fs::path& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      const std::string line = "exec " + cmd + " >" + log.string() + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here, so the group exists before we signal it
  }
  ~Launched() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!reaped_) ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  /// Waits up to `limit` for mpirun to exit; its wait status, or nullopt on timeout.
  std::optional<int> wait(std::chrono::seconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
  bool exited() {
    int status = 0;
    if (!reaped_ && ::waitpid(pid_, &status, WNOHANG) == pid_) reaped_ = true;
    return reaped_;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

/// The child of `parent` whose environment says OMPI_COMM_WORLD_RANK=`rank`, or -1.
pid_t rank_pid(pid_t parent, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string pid, comm, state;
    long ppid = 0;
    if (!(stat >> pid >> comm >> state >> ppid) || ppid != parent) continue;
    std::ifstream env(e.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(env, var, '\0')) {
      if (var == want) return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

std::map<int, std::string> summaries(const fs::path& dir) {
  std::map<int, std::string> out;
  for (int k = 0; k < kPoints; ++k) {
    const fs::path p = dir / "points" / std::to_string(k) / "summary.json";
    if (fs::exists(p)) out[k] = read_file(p);
  }
  return out;
}

/// mpirun itself (the process Launched waits on and whose children are the ranks).
std::string mpirun2() {
  return "mpirun --oversubscribe --allow-run-as-root -np 2 " + kvshift::testing::kvshift_exe();
}

TEST(SweepMpiResume, ARankKilledMidSweepResumesOnlyTheMissingPointsToTheSameTable) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  const auto ref = testing::scratch("resume-ref"), dir = testing::scratch("resume-killed");
  const auto whole =
      run_command(kvshift::testing::kvshift_exe() + " sweep " + testing::tiny_scenario() + kAxes +
                  " --jobs 2 --no-report --quiet --out " + ref.string());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;

  std::map<int, std::string> before;
  {
    Launched job(mpirun2() + " sweep " + testing::tiny_scenario() + kAxes +
                     " --jobs 1 --no-report --quiet --out " + dir.string(),
                 dir.parent_path() / (dir.filename().string() + ".log"));
    const auto end = Clock::now() + std::chrono::seconds(120);
    while (summaries(dir).empty() && !job.exited() && Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(job.exited()) << "the sweep ended before a rank could be killed";
    ASSERT_FALSE(summaries(dir).empty()) << "no point finished within 120 s";
    const std::size_t at_kill = summaries(dir).size();
    const pid_t victim = rank_pid(job.pid(), 1);
    ASSERT_GT(victim, 0) << "rank 1 not found among mpirun's children";
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    const auto status = job.wait(std::chrono::seconds(60));
    ASSERT_TRUE(status) << "mpirun did not stop within 60 s of losing rank 1";
    EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "a dead rank fails the run";
    before = summaries(dir);
    std::cout << "[ resume ] rank 1 killed with " << at_kill << " point(s) on disk\n";
  }  // the group is killed and reaped here, whatever happened
  EXPECT_FALSE(fs::exists(dir / "sweep.csv"));
  ASSERT_LT(before.size(), static_cast<std::size_t>(kPoints)) << "nothing left to resume";
  std::cout << "[ resume ] " << before.size() << " of " << kPoints
            << " points were on disk when rank 1 was killed\n";
  std::map<int, fs::file_time_type> stamps;
  for (const auto& [k, text] : before) {
    stamps[k] = fs::last_write_time(dir / "points" / std::to_string(k) / "summary.json");
  }

  const auto resumed =
      run_command("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 180 " +
                  mpirun2() + " sweep --resume " + dir.string() + " --jobs 1 --no-report");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  const std::string expect = std::to_string(kPoints - before.size()) + " simulated now, " +
                             std::to_string(before.size()) + " already done";
  EXPECT_NE(resumed.out.find(expect), std::string::npos) << expect << "\n" << resumed.out;
  for (const auto& [k, stamp] : stamps) {
    EXPECT_EQ(fs::last_write_time(dir / "points" / std::to_string(k) / "summary.json"), stamp)
        << "point " << k << " was done before the kill and must not be simulated again";
  }
  EXPECT_EQ(read_file(dir / "sweep.csv"), read_file(ref / "sweep.csv"));
  EXPECT_EQ(summaries(dir), summaries(ref));
}

}  // namespace
}  // namespace kvshift::sweep
