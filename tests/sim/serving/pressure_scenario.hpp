// The prefix-caching pressure scenario the books tests share: four 2-GPU nodes of
// 5 GiB HBM, 80 % of arrivals on one of seed²·20 shared 2,048-token prefixes (more
// than HBM holds from seed 2 on), a node failure and repair, a drain. With
// `tiers`: a 1 GiB host tier per node beside the replicas (local or next-node by
// seed), a GPU failure, and prefix-aware routing on two seeds of three.
#pragma once

#include <cstdint>
#include <string>

namespace kvshift::sim::testing {

inline std::string pressure_scenario(std::uint64_t seed, bool tiers) {
  const std::string n = std::to_string(seed);
  return R"({
    "name": "p", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"node": {"gpus": 2, "hbm": "5GiB")" +
         std::string(tiers ? R"(, "host_memory": "1GiB")" : "") + R"(},
                "star": {"nodes": 4, "bandwidth": "50Gbps", "latency": "5us"}},
    "workload": {"arrival": "poisson", "rate": )" +
         std::to_string(20 + 10 * seed) + R"(,
                 "prompt_tokens": {"distribution": "lognormal", "mean": 3000, "cv": 0.8},
                 "output_tokens": {"distribution": "uniform", "min": 1, "max": 400},
                 "shared_prefix": {"share": 0.8, "groups": )" +
         std::to_string(seed * seed * 20) + R"(, "tokens": 2048}},
    "serving": {"max_batch": 16, "prefix_cache": {"block_tokens": 128)" +
         std::string(tiers ? R"(, "host_offload": true)" : "") + R"(}},
    "protection": {"mode": "full")" +
         std::string(
             tiers ? (seed % 2 ? R"(, "placement": "local")" : R"(, "placement": "next_node")")
                   : "") +
         R"(},
    "events": [)" +
         std::string(tiers ? R"({"type": "gpu_failure", "at": "2s", "node": "gpu0", "gpu": 1},)"
                           : "") +
         R"({"type": "node_failure", "at": "3s", "node": "gpu1", "repair_after": "2s"},
               {"type": "drain", "at": "5s", "node": "gpu2"}],
    "policies": {"strategies": ["full_kv", "token_replay", "adaptive"], "router": ")" +
         std::string(tiers && seed % 3 ? "prefix_aware" : "least_loaded") + R"("},
    "seed": )" +
         n + R"(, "duration": "10s"})";
}

}  // namespace kvshift::sim::testing
