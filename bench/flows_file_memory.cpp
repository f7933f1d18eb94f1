// Peak heap of reading a flows file (and of running it) two ways, in one
// process: the DOM path (nlohmann parses the whole file, then the reader walks
// it; what `kvshift flows` did before) and the streamed path `kvshift flows`
// uses now (input/json_stream.hpp: one transfer's DOM at a time). Usage:
//   flows_file_memory FILE.json
#include <cstdio>

#include "bench/heap_meter.hpp"
#include "input/flows_file.hpp"

namespace {

using namespace kvshift;

double mb(std::size_t bytes) { return static_cast<double>(bytes) / 1e6; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: flows_file_memory FILE.json\n");
    return 2;
  }
  const std::string path = argv[1];
  std::size_t base = bench::heap_in_use();
  bench::reset_heap_peak();
  std::size_t n = 0;
  {
    const input::FlowsFile f = input::parse_flows(input::read_json_file(path), path);
    n = f.transfers.size();
  }
  const std::size_t dom = bench::heap_peak() - base;
  base = bench::heap_in_use();
  bench::reset_heap_peak();
  input::FlowsFile f = input::load_flows_file(path);
  const std::size_t streamed = bench::heap_peak() - base;
  const std::size_t parsed = bench::heap_in_use() - base;
  bench::reset_heap_peak();
  const auto outcomes = input::simulate_flows(f);
  const std::size_t run = bench::heap_peak() - base;
  const double per = 1.0 / static_cast<double>(n ? n : 1);
  std::printf("%zu transfers\n", n);
  std::printf("read, DOM path:      peak %.1f MB = %.0f B/transfer\n", mb(dom), dom * per);
  std::printf("read, streamed path: peak %.1f MB = %.0f B/transfer (%.0f B/transfer kept)\n",
              mb(streamed), streamed * per, parsed * per);
  std::printf("read + run (streamed): peak %.1f MB = %.0f B/transfer (%zu outcomes)\n", mb(run),
              run * per, outcomes.size());
  return 0;
}
