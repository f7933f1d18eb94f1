// `kvshift flows` as a user runs it: output lines, exit codes, messages.
#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

std::string write_temp(const std::string& text) {
  char tmpl[] = "/tmp/kvshift-flows-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  std::ofstream(tmpl) << text;
  return tmpl;
}

// A flow-level run loads no GPU library: a CUDA build opens cuBLAS on first use, not at
// start-up (its cuBLASLt alone was ~210 MB resident before main()). RUSAGE_CHILDREN's max RSS
// covers every child this test process has waited for, so the run gets a process of its own.
TEST(FlowsCli, AFlowsRunStaysSmallWithoutTheGpuLibraries) {
  const std::string args =
      std::string("flows ") + KVSHIFT_SOURCE_DIR + "/examples/flows/two_hops.json > /dev/null";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto r = run_kvshift(args);
    rusage use{};
    ::getrusage(RUSAGE_CHILDREN, &use);
    std::_Exit(r.exit_code == 0 && use.ru_maxrss < 64 * 1024 ? 0 : 1 + (r.exit_code != 0));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "kvshift flows failed";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "kvshift flows used 64 MB or more at its peak";
}

TEST(FlowsCli, PrintsOneLinePerTransferInInputOrder) {
  const auto r =
      run_kvshift(std::string("flows ") + KVSHIFT_SOURCE_DIR + "/examples/flows/two_hops.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"id\": \"t1\", \"finish_s\": 12.50105}\n"
            "{\"id\": \"t2\", \"finish_s\": 9.00105}\n"
            "{\"id\": \"t3\", \"finish_s\": 1.808404651}\n");
}

TEST(FlowsCli, ShippedLeafSpineExampleRuns) {
  const auto r = run_kvshift(std::string("flows ") + KVSHIFT_SOURCE_DIR +
                             "/examples/flows/leaf_spine_migrations.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_GT(j["finish_s"].get<double>(), 0) << line;
    ++n;
  }
  EXPECT_EQ(n, 8);
}

TEST(FlowsCli, OutWritesTheSameLines) {
  const std::string in = write_temp(R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
    "links": [{"name": "L", "a": "A", "b": "B", "bandwidth": "1Gbps", "latency": "1ms"}]},
    "transfers": [{"id": "x", "src": "A", "dst": "B", "bytes": "125MB", "start": "1s"}]})");
  const std::string out = in + ".out";
  const auto r = run_kvshift("flows " + in + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"id\": \"x\", \"finish_s\": 2.001}\n");
  EXPECT_EQ(slurp(out), r.out);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(FlowsCli, AFolderAsOutIsRefusedBeforeTheWork) {
  const std::string in = write_temp(R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
    "links": [{"name": "L", "a": "A", "b": "B", "bandwidth": "1Gbps", "latency": "1ms"}]},
    "transfers": [{"id": "x", "src": "A", "dst": "B", "bytes": "125MB", "start": "1s"}]})");
  const std::string dir = in + ".d";
  std::filesystem::create_directories(dir);
  const auto r = run_kvshift("flows " + in + " --out " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: " + dir + " is a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Success"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(run_kvshift("flows " + in + " --out ''").exit_code, 2);
  std::filesystem::remove_all(dir);
  std::remove(in.c_str());
}

TEST(FlowsCli, BadInputExitsTwoWithTheJsonPath) {
  const std::string in = write_temp(R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
    "links": [{"name": "L", "a": "A", "b": "B", "bandwidth": "fast"}]},
    "transfers": [{"id": "x", "src": "A", "dst": "C", "bytes": 1}]})");
  const auto r = run_kvshift("flows " + in);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("kvshift: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/cluster/links/0/bandwidth"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/transfers/0/dst: unknown node \"C\""), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  std::remove(in.c_str());
  EXPECT_EQ(run_kvshift("flows /nonexistent/flows.json").exit_code, 2);
  EXPECT_EQ(run_kvshift("flows").exit_code, 2) << "the file is required";
}

}  // namespace
}  // namespace kvshift::testing
