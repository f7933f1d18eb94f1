#!/usr/bin/env python3
"""Writes the fleet-hour scenario at SCALE times the 1,024-GPU hour: 32*SCALE leaves of
32 single-GPU H100 nodes on 8 spines, 1M*SCALE requests over one simulated hour, 3*SCALE
node failures (two of every three repaired after 300 s) and SCALE drains, RISK-KV
protection. Scale 10 is bench/scenarios/fleet-10240-hour.json.
Usage: bench/fleet_scenario.py SCALE > scenario.json"""
import json
import sys


def scenario(scale: int) -> dict:
    nodes = 1024 * scale
    events = []
    failures = 3 * scale
    for i in range(failures):
        at = 600 + i * (2700 // failures)  # spread over 600 s .. 3300 s
        node = (17 + i * 487) % nodes       # far apart, on different leaves
        e = {"type": "node_failure", "at": f"{at}s", "node": f"gpu{node}",
             "detection_delay": "1s"}
        if i % 3 != 2:
            e["repair_after"] = "300s"
        events.append(e)
    for i in range(scale):
        at = 900 + i * (2400 // scale)
        events.append({"type": "drain", "at": f"{at}s", "node": f"gpu{(301 + i * 733) % nodes}"})
    events.sort(key=lambda e: float(e["at"][:-1]))
    return {
        "name": f"fleet-{nodes}-hour",
        "description": (f"Benchmark: {nodes:,} single-GPU H100 nodes on a {32 * scale}-leaf, "
                        "8-spine leaf-spine serve Llama-3.1-8B for one simulated hour, "
                        f"{scale:,} million requests, {failures} node failures and {scale} "
                        "drains, RISK-KV protection streaming kept layers to the next node."),
        "model": "llama-3.1-8b",
        "gpu": "h100",
        "cluster": {
            "node": {"gpus": 1, "host_memory": "512GiB"},
            "leaf_spine": {"leaves": 32 * scale, "spines": 8, "nodes_per_leaf": 32,
                           "node_bandwidth": "100Gbps", "uplink_bandwidth": "400Gbps",
                           "latency": "2us"},
        },
        "workload": {
            "arrival": "poisson",
            "rate": round(277.78 * scale, 2),
            "max_requests": 1_000_000 * scale,
            "prompt_tokens": {"distribution": "lognormal", "mean": 500, "cv": 0.6, "min": 16,
                              "max": 4096},
            "output_tokens": {"distribution": "lognormal", "mean": 200, "cv": 0.6, "min": 1,
                              "max": 2048},
        },
        "serving": {"max_batch": 32, "kv_block_tokens": 16},
        "protection": {"mode": "risk_kv", "placement": "next_node", "stream_every_tokens": 64},
        "events": events,
        "policies": {"strategies": ["risk_kv"]},
        "risk_kv": {"topology": "G3,G6,G9,G12", "delta_nll": 0.01},
        "seed": 1,
        "duration": "3600s",
        "outputs": {"files": ["summary"], "link_sample_interval": "60s"},
    }


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit("usage: fleet_scenario.py SCALE (a whole number >= 1)")
    json.dump(scenario(int(sys.argv[1])), sys.stdout, indent=2)
    sys.stdout.write("\n")
