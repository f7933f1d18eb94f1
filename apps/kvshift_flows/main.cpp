// `kvshift-flows FILE.json`: `kvshift flows` as a program of its own, linked with
// the network model and the flows reader only. Same input, same lines on
// stdout, same exit codes (0 every transfer finished, 1 one did not, 2 bad
// input or usage with every problem's JSON path). It links no backend: about 4 MB
// less resident than kvshift for the same run (kvshift opens cuBLAS only on first
// use, so neither maps it). Left out: kvshift flows' --out (redirect stdout).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "cost_model/input_error.hpp"
#include "input/flows_file.hpp"

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: kvshift-flows FILE.json\n"
        "Runs the transfers of a flows file through the network model alone and prints one\n"
        "JSON line per transfer, in input order (as `kvshift flows FILE.json`).\n");
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvshift-flows FILE.json\n");
    return 2;
  }
  try {
    kvshift::input::FlowsFile flows = kvshift::input::load_flows_file(argv[1]);
    const kvshift::input::FlowResults results = kvshift::input::run_flows(flows);
    kvshift::input::write_flow_lines(flows, results, [](std::string_view chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    });
    if (std::fflush(stdout) != 0) {
      std::fprintf(stderr, "kvshift-flows: error: cannot write the output\n");
      return 1;
    }
    return results.all_finished() ? 0 : 1;
  } catch (const kvshift::InputError& e) {
    std::fprintf(stderr, "kvshift-flows: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvshift-flows: error: %s\n", e.what());
    return 1;
  }
}
